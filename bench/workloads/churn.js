// Allocation churn for node: Buffers (backing stores come from the C++
// allocator), strings, objects, Maps and JSON round trips.
//
// Usage: node churn.js ROUNDS
// Prints a checksum.
'use strict';

function oneRound(seed) {
  const map = new Map();
  let total = 0;
  for (let i = 0; i < 2000; i++) {
    const size = 64 + ((i * 7919 + seed) % 4096);
    const buffer = Buffer.alloc(size, i & 0xff);
    const key = `key-${seed}-${i}`;
    map.set(key, { buffer, index: i, tags: [key, String(size)] });
    total += buffer[size - 1];
  }
  const text = JSON.stringify([...map.keys()].slice(0, 500));
  total += JSON.parse(text).length;
  for (const [key, value] of map) {
    if (value.index % 3 === 0) map.delete(key);
  }
  return total + map.size;
}

const rounds = Number(process.argv[2] || 10);
let checksum = 0;
for (let round = 0; round < rounds; round++) {
  checksum = (checksum + oneRound(round)) % 1000003;
}
console.log(`rounds=${rounds} checksum=${checksum}`);
