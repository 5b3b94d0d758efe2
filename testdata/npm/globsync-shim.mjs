// Node 20 lacks fs.globSync (added in Node 22), which the conformance suite
// imports by name from "fs". The named exports of a built-in module are fixed
// when it is first loaded, so patching the fs object is not enough: loaded with
// `node --import ./globsync-shim.mjs`, this registers a resolve hook that sends
// ES-module imports of "fs" to fs-globsync.mjs, which is fs plus globSync.
// On Node 22 and later it does nothing.
import fs from "node:fs";
import { register } from "node:module";
import { isMainThread } from "node:worker_threads";

const facade = new URL("./fs-globsync.mjs", import.meta.url).href;

if (isMainThread && typeof fs.globSync !== "function") {
  register(import.meta.url);
}

export async function resolve(specifier, context, nextResolve) {
  if ((specifier === "fs" || specifier === "node:fs") && context.parentURL !== facade) {
    return { url: facade, shortCircuit: true };
  }
  return nextResolve(specifier, context);
}
