// Imported first by stdio.ts: in the stdio form stdout carries the protocol
// only, and the reference server logs with console.log (its HTTP listener
// too, which still starts on a port no one reaches).
console.log = (...args: unknown[]) => console.error(...args);
console.info = console.log;
process.env.PORT = process.env.PORT || '0';
