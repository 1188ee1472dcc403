/** A comma-separated option value as its non-empty, trimmed items. */
export function commaList(value: string | undefined): string[] {
  return (value ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
}
