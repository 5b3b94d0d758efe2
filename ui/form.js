// Forms built from an elicitation's requested_schema (a flat object of
// primitive properties, as MCP allows): string (with format, length and
// pattern), number, integer, boolean and enum (enum, oneOf of const/title,
// enumNames), required fields, and the schema's limits checked in the page
// before anything is sent.
import { h } from './dom.js';

const inputTypes = { email: 'email', uri: 'url', date: 'date', 'date-time': 'datetime-local' };

// schemaForm returns {el, read}: read() returns {ok, content} with the
// values converted to the schema's types, or ok false after showing each
// field's error beside it.
export function schemaForm(schema, idPrefix) {
  const props = (schema && typeof schema.properties === 'object' && schema.properties) || {};
  const required = new Set(Array.isArray(schema && schema.required) ? schema.required : []);
  const fields = Object.entries(props).map(([name, prop], i) => field(name, prop || {}, required.has(name), `${idPrefix}-${i}`));
  return {
    el: h('div', { class: 'schema-form' }, fields.map((f) => f.el)),
    read() {
      const content = {};
      let ok = true;
      for (const f of fields) {
        const r = f.read();
        f.error.textContent = r.error || '';
        f.input.setAttribute('aria-invalid', r.error ? 'true' : 'false');
        if (r.error) ok = false;
        else if (r.value !== undefined) content[f.name] = r.value;
      }
      return { ok, content };
    },
  };
}

function options(prop) {
  if (Array.isArray(prop.enum)) {
    return prop.enum.map((v, i) => ({ value: v, label: String((prop.enumNames && prop.enumNames[i]) ?? v) }));
  }
  const alts = prop.oneOf || prop.anyOf;
  if (Array.isArray(alts) && alts.every((a) => a && 'const' in a)) {
    return alts.map((a) => ({ value: a.const, label: String(a.title ?? a.const) }));
  }
  return null;
}

function field(name, prop, isRequired, id) {
  const title = prop.title || name;
  const errId = id + '-err';
  const error = h('div', { class: 'field-error', id: errId, 'aria-live': 'polite' });
  const desc = prop.description ? h('div', { class: 'hint', id: id + '-desc' }, prop.description) : null;
  const described = [desc ? id + '-desc' : '', errId].filter(Boolean).join(' ');
  const opts = options(prop);
  let input;
  let read;
  if (prop.type === 'array') {
    return multiField(name, prop, isRequired, id, title, desc, error);
  }
  if (opts) {
    input = h('select', { id, name, 'aria-describedby': described, required: isRequired },
      h('option', { value: '' }, isRequired ? 'Choose…' : '(none)'),
      opts.map((o, i) => h('option', { value: String(i), selected: prop.default !== undefined && o.value === prop.default }, o.label)));
    read = () => {
      if (input.value === '') return isRequired ? { error: `${title} is required` } : {};
      return { value: opts[Number(input.value)].value };
    };
  } else if (prop.type === 'boolean') {
    input = h('input', { type: 'checkbox', id, name, 'aria-describedby': described, checked: prop.default === true });
    read = () => ({ value: input.checked });
    return { name, input, error, read, el: h('div', {}, h('label', { class: 'inline', for: id }, input, title), desc, error) };
  } else if (prop.type === 'number' || prop.type === 'integer') {
    input = h('input', { type: 'number', id, name, 'aria-describedby': described, required: isRequired,
      step: prop.type === 'integer' ? '1' : 'any', min: prop.minimum, max: prop.maximum, value: prop.default ?? '' });
    read = () => readNumber(input.value.trim(), prop, isRequired, title);
  } else {
    const type = inputTypes[prop.format] || 'text';
    input = h('input', { type, id, name, 'aria-describedby': described, required: isRequired,
      minlength: prop.minLength, maxlength: prop.maxLength, value: prop.default ?? '' });
    read = () => readString(input, prop, isRequired, title);
  }
  const label = h('label', { for: id }, title, isRequired ? h('span', { class: 'hint' }, ' (required)') : null);
  return { name, input, error, read, el: h('div', {}, label, desc, input, error) };
}

// multiField is a multi-select enum (type array, items with enum or
// anyOf/oneOf of consts) as a group of checkboxes, with minItems/maxItems.
function multiField(name, prop, isRequired, id, title, desc, error) {
  const opts = options(prop.items || {}) || [];
  const chosen = new Set(Array.isArray(prop.default) ? prop.default : []);
  const boxes = opts.map((o, i) => h('input', { type: 'checkbox', id: `${id}-${i}`, checked: chosen.has(o.value) }));
  const group = h('fieldset', { id, 'aria-describedby': error.id },
    h('legend', {}, title, isRequired ? h('span', { class: 'hint' }, ' (required)') : null), desc,
    boxes.map((b, i) => h('label', { class: 'inline', for: b.id }, b, opts[i].label)));
  const read = () => {
    const value = opts.filter((_, i) => boxes[i].checked).map((o) => o.value);
    if (!value.length && isRequired) return { error: `${title} is required` };
    if (!value.length && !prop.minItems) return {};
    if (typeof prop.minItems === 'number' && value.length < prop.minItems) return { error: `${title}: choose at least ${prop.minItems}` };
    if (typeof prop.maxItems === 'number' && value.length > prop.maxItems) return { error: `${title}: choose at most ${prop.maxItems}` };
    return { value };
  };
  return { name, input: group, error, read, el: h('div', {}, group, error) };
}

function readNumber(raw, prop, isRequired, title) {
  if (raw === '') return isRequired ? { error: `${title} is required` } : {};
  const n = Number(raw);
  if (!isFinite(n)) return { error: `${title} must be a number` };
  if (prop.type === 'integer' && !Number.isInteger(n)) return { error: `${title} must be a whole number` };
  if (typeof prop.minimum === 'number' && n < prop.minimum) return { error: `${title} must be at least ${prop.minimum}` };
  if (typeof prop.maximum === 'number' && n > prop.maximum) return { error: `${title} must be at most ${prop.maximum}` };
  return { value: n };
}

function readString(input, prop, isRequired, title) {
  let v = input.value;
  if (v === '') return isRequired ? { error: `${title} is required` } : {};
  const len = [...v].length;
  if (typeof prop.minLength === 'number' && len < prop.minLength) return { error: `${title} must have at least ${prop.minLength} characters` };
  if (typeof prop.maxLength === 'number' && len > prop.maxLength) return { error: `${title} must have at most ${prop.maxLength} characters` };
  if (prop.pattern) {
    let re = null;
    try { re = new RegExp(prop.pattern, 'u'); } catch { re = null; }
    if (re && !re.test(v)) return { error: `${title} does not match the pattern ${prop.pattern}` };
  }
  if (prop.format === 'email' && !/^[^@\s]+@[^@\s]+$/.test(v)) return { error: `${title} must be an email address` };
  if (prop.format === 'uri') {
    try { new URL(v); } catch { return { error: `${title} must be a URL` }; }
  }
  if (prop.format === 'date-time') {
    const d = new Date(v);
    if (isNaN(d)) return { error: `${title} must be a date and time` };
    v = d.toISOString();
  }
  if (input.validity && !input.validity.valid && !input.validity.valueMissing) {
    return { error: `${title}: ${input.validationMessage}` };
  }
  return { value: v };
}
