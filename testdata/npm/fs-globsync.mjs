// The "fs" module plus a globSync for Node 20; see globsync-shim.mjs. The
// suite only globs "**/<file>" patterns (its tier-check command), so this
// supports "*", "**" and "?" on relative paths and nothing more.
import fs from "node:fs";
import path from "node:path";

export * from "node:fs";
export default fs;

function toRegExp(pattern) {
  let re = "";
  for (let i = 0; i < pattern.length; i++) {
    const c = pattern[i];
    if (c === "*" && pattern[i + 1] === "*") {
      i++;
      if (pattern[i + 1] === "/") {
        i++;
        re += "(?:.*/)?";
      } else {
        re += ".*";
      }
    } else if (c === "*") {
      re += "[^/]*";
    } else if (c === "?") {
      re += "[^/]";
    } else {
      re += c.replace(/[.+^${}()|[\]\\]/g, "\\$&");
    }
  }
  return new RegExp("^" + re + "$");
}

function walk(root, rel, out) {
  let entries;
  try {
    entries = fs.readdirSync(path.join(root, rel), { withFileTypes: true });
  } catch {
    return;
  }
  for (const entry of entries) {
    const child = rel === "" ? entry.name : rel + "/" + entry.name;
    out.push(child);
    if (entry.isDirectory()) walk(root, child, out);
  }
}

export function globSync(patterns, options = {}) {
  const cwd = options.cwd ? String(options.cwd) : process.cwd();
  const matchers = [].concat(patterns).map(toRegExp);
  const all = [];
  walk(cwd, "", all);
  return all.filter((p) => matchers.some((m) => m.test(p)));
}
