/**
 * The JSON text of values that never change once set (a run's input, a visit's resolved payload),
 * kept per object while it lives: a visit is written again at each change of its state or counts
 * (a map's, at every chunk of items), and a 100,000-item payload would be serialized each time.
 */
const texts = new WeakMap<object, string>();

export function frozenJsonText(value: unknown): string {
  if (value === null || typeof value !== "object") return JSON.stringify(value);
  let text = texts.get(value);
  if (text === undefined) {
    text = JSON.stringify(value);
    texts.set(value, text);
  }
  return text;
}
