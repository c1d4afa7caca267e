import { randomBytes } from "node:crypto";

/**
 * A UUIDv7 (RFC 9562): 48 bits of milliseconds, then random bits. Run ids that grow with time
 * keep each commit's index writes on the last pages of the B-trees instead of random ones.
 */
export function uuidv7(now: number): string {
  const b = randomBytes(16);
  b.writeUIntBE(Math.max(0, Math.floor(now)) % 2 ** 48, 0, 6);
  b[6] = ((b[6] as number) & 0x0f) | 0x70;
  b[8] = ((b[8] as number) & 0x3f) | 0x80;
  const h = b.toString("hex");
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}
