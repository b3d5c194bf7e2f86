// Rate limits. options.mode "conn": events_per_second/events_burst per
// connection (options.burst); "ip": ip_events_per_second/ip_events_burst
// per IP (options.burst) across several connections from 127.0.0.1.
import { test, run, options, newUser, expectPrefix, pollUntil, RawClient } from './harness.mjs';

// blast sends n events without waiting and returns their OK messages.
async function blast(c, user, n) {
  const evs = Array.from({ length: n }, (_, i) => user.event({ content: 'burst ' + i + ' ' + Math.random() }));
  for (const e of evs) c.send(['EVENT', e]);
  const oks = [];
  for (const e of evs) oks.push(await c.ok(e.id));
  return oks;
}

if (options.mode === 'conn') {
  test('per-connection rate limit: rate-limited:, then recovers', async (t) => {
    const c = await RawClient.open();
    const u = newUser();
    const oks = await blast(c, u, options.burst * 3);
    t.ok(oks.every((o) => o), 'every event got an OK', oks);
    t.ok(oks.slice(0, options.burst).every((o) => o && o[2] === true), 'the first burst is accepted', oks);
    const limited = oks.filter((o) => o && o[2] === false);
    t.ok(limited.length > 0, 'some events beyond the burst are refused', oks);
    for (const o of limited) expectPrefix(t, o[3], 'rate-limited:', 'over the per-connection rate');
    const other = await RawClient.open();
    const fresh = await blast(other, newUser(), 1);
    t.ok(fresh[0] && fresh[0][2] === true, 'another connection has its own bucket', fresh);
    const recovered = await pollUntil(async () => {
      const [o] = await blast(c, u, 1);
      return o && o[2] === true;
    }, 15000, 300);
    t.ok(recovered, 'the limited connection recovers as tokens refill');
    c.close();
    other.close();
  });
} else {
  test('per-IP rate limit across connections: rate-limited:', async (t) => {
    const conns = await Promise.all([0, 1, 2].map(() => RawClient.open()));
    const results = await Promise.all(conns.map((c) => blast(c, newUser(), options.burst)));
    const all = results.flat();
    t.ok(all.every((o) => o), 'every event got an OK', all);
    const accepted = all.filter((o) => o && o[2] === true).length;
    const limited = all.filter((o) => o && o[2] === false);
    t.ok(accepted >= options.burst, `at least the IP burst (${options.burst}) accepted`, accepted);
    t.ok(limited.length > 0, `3 x ${options.burst} events from one IP: some refused`, all);
    for (const o of limited) expectPrefix(t, o[3], 'rate-limited:', 'over the per-IP rate');
    for (const c of conns) c.close();
  });
}

await run();
