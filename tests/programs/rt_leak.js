// Leaks Buffers through two named functions, handleRequest then makeBuffer.
// Buffer.allocUnsafeSlow never uses Node's pool: each buffer's memory is a
// malloc of its size (node::NodeArrayBufferAllocator). Prints the bytes it
// keeps, the program's truth.
"use strict";
const kept = [];
let bytes = 0;

function makeBuffer(size) {
  return Buffer.allocUnsafeSlow(size);
}

function handleRequest(i) {
  const buffer = makeBuffer(16384 + (i % 7) * 1024);
  buffer[0] = i & 255;
  bytes += buffer.length;
  kept.push(buffer);
}

const requests = Number(process.argv[2] || 4000);
for (let i = 0; i < requests; i++) {
  handleRequest(i);
}
console.log(`kept ${kept.length} buffers ${bytes} bytes`);
