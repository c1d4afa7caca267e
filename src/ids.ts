import { randomBytes } from "node:crypto";

// Random bytes are drawn from a pool: one crypto call serves many ids, span ids and traces.
let pool = Buffer.alloc(0);
let offset = 0;

function take(n: number): Buffer {
  if (offset + n > pool.length) {
    pool = randomBytes(4096);
    offset = 0;
  }
  offset += n;
  return pool.subarray(offset - n, offset);
}

/** `bytes` random bytes as lowercase hex. */
export function randomHex(bytes: number): string {
  return take(bytes).toString("hex");
}

/**
 * A UUIDv7 (RFC 9562): 48 bits of milliseconds, then random bits. Run ids that grow with time
 * keep each commit's index writes on the last pages of the B-trees instead of random ones.
 */
export function uuidv7(now: number): string {
  const b = Buffer.from(take(16));
  b.writeUIntBE(Math.max(0, Math.floor(now)) % 2 ** 48, 0, 6);
  b[6] = ((b[6] as number) & 0x0f) | 0x70;
  b[8] = ((b[8] as number) & 0x3f) | 0x80;
  const h = b.toString("hex");
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}
