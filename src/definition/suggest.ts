// "Did you mean" hints: the nearest known name by edit distance (internal).

/**
 * The candidate nearest to `word`, when it is near enough to be a typo of it: at most 2 edits,
 * and fewer for short words (1 edit for up to 5 characters), so a short word is not "corrected"
 * into another one.
 * @example nearest("timout", ["timeout", "retry_count"]) // "timeout"
 */
export function nearest(
  word: string,
  candidates: Iterable<string>,
  limit = Math.min(2, Math.max(1, Math.floor(word.length / 3))),
): string | undefined {
  if (limit < 1) return undefined;
  let best: string | undefined;
  let bestDistance = limit + 1;
  for (const c of candidates) {
    if (c === word) continue;
    const d = editDistance(c, word, limit);
    if (d < bestDistance) {
      best = c;
      bestDistance = d;
    }
  }
  return best;
}

/** Levenshtein distance, or `limit + 1` as soon as it is known to be larger than `limit`. */
export function editDistance(a: string, b: string, limit = 2): number {
  if (Math.abs(a.length - b.length) > limit) return limit + 1;
  let prev = Array.from({ length: b.length + 1 }, (_, k) => k);
  for (let x = 1; x <= a.length; x++) {
    const row = [x];
    for (let y = 1; y <= b.length; y++) {
      const cost = a[x - 1] === b[y - 1] ? 0 : 1;
      row.push(Math.min((prev[y] ?? 0) + 1, (row[y - 1] ?? 0) + 1, (prev[y - 1] ?? 0) + cost));
    }
    prev = row;
  }
  return prev[b.length] ?? 0;
}
