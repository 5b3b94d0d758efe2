// Keeps test servers off the network. Loaded with `node --import
// ./loopback.mjs`, it makes every TCP listen() that names no host, or a
// wildcard host (0.0.0.0, ::), bind 127.0.0.1 instead. Once a server is
// listening it writes one line to stderr,
//
//   loopback.mjs: listening on 127.0.0.1:PORT
//
// so a test can start a server with PORT=0 and learn the port the kernel
// picked, without guessing a free port or polling.
import net from "node:net";

const wildcard = new Set([undefined, null, "", "0.0.0.0", "::", "[::]"]);
const listen = net.Server.prototype.listen;

function announce(server) {
  server.once("listening", () => {
    const address = server.address();
    if (address && typeof address === "object") {
      process.stderr.write(`loopback.mjs: listening on ${address.address}:${address.port}\n`);
    }
  });
}

net.Server.prototype.listen = function (...args) {
  const first = args[0];
  if (first === undefined || typeof first === "function") {
    announce(this);
    return listen.call(this, 0, "127.0.0.1", ...args);
  }
  if (typeof first === "number" || (typeof first === "string" && /^\d+$/.test(first))) {
    const rest = args.slice(1);
    const host = typeof rest[0] === "string" ? rest.shift() : undefined;
    if (wildcard.has(host)) {
      announce(this);
      return listen.call(this, Number(first), "127.0.0.1", ...rest);
    }
    return listen.call(this, Number(first), host, ...rest);
  }
  if (first && typeof first === "object" && first.path === undefined && first.fd === undefined &&
      !(first instanceof net.Server) && !("_handle" in first) && wildcard.has(first.host)) {
    announce(this);
    return listen.call(this, { ...first, host: "127.0.0.1" }, ...args.slice(1));
  }
  return listen.apply(this, args);
};
