/**
 * The number of single-character insertions, deletions and substitutions that turn `a` into `b`
 * (Levenshtein distance).
 */
export function editDistance(a: string, b: string): number {
  let previous = Array.from({ length: b.length + 1 }, (_, index) => index);
  for (let i = 1; i <= a.length; i++) {
    const current = [i];
    for (let j = 1; j <= b.length; j++) {
      const substitution = (previous[j - 1] as number) + (a[i - 1] === b[j - 1] ? 0 : 1);
      current.push(Math.min((previous[j] as number) + 1, (current[j - 1] as number) + 1, substitution));
    }
    previous = current;
  }
  return previous[b.length] as number;
}

/**
 * The known name closest to a misspelt one, for a "did you mean …?" in an error message: compared
 * without regard to case, at most 2 edits away (or a fifth of the name's length, for long names);
 * null when nothing is that close. Ties go to the first candidate.
 *
 * ```ts
 * closestName('leaseRenewalIntervalMs', ['leaseRenewIntervalMs', 'leaseExpiryMs']); // 'leaseRenewIntervalMs'
 * ```
 */
export function closestName(name: string, candidates: Iterable<string>): string | null {
  const lower = name.toLowerCase();
  const limit = Math.max(2, Math.floor(name.length / 5));
  let best: { name: string; distance: number } | null = null;
  for (const candidate of candidates) {
    const distance = editDistance(lower, candidate.toLowerCase());
    if (distance <= limit && (best === null || distance < best.distance)) {
      best = { name: candidate, distance };
    }
  }
  return best?.name ?? null;
}
