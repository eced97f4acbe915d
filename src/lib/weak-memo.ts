/**
 * `make(key)` once per key object, kept as long as the key lives: statements prepared once per
 * SQLite connection, caches kept once per open store. A WeakMap, so a closed connection or store
 * takes its value with it.
 */
export function weakMemo<K extends object, T>(make: (key: K) => T): (key: K) => T {
  const values = new WeakMap<K, T>();
  return (key) => {
    let value = values.get(key);
    if (value === undefined) values.set(key, (value = make(key)));
    return value;
  };
}
