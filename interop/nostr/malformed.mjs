// Malformed frames: each is answered (NOTICE, OK false or CLOSED with a
// NIP-01 prefix), leaves its own connection usable, and never disturbs
// another client's subscription.
import { test, run, newUser, connect, publish, live, pollUntil, expectPrefix, RawClient } from './harness.mjs';

// A filter that matches nothing, so a frame a lenient relay accepts streams nothing.
const nothing = '{"ids":["' + '0'.repeat(64) + '"]}';
const malformed = [
  'not json at all',
  '{"EVENT": 1}',
  '[]',
  '"EVENT"',
  '["EVENT"]',
  '["EVENT", 5]',
  '["EVENT", {"id": "zz"}]',
  '["EVENT", {"id": "' + '0'.repeat(64) + '", "kind": "one"}]',
  '["REQ"]',
  '["REQ", "s", 5]',
  '["REQ", "s", {"kinds": "x"}]',
  '["REQ", "' + 'x'.repeat(100) + '", ' + nothing + ']',
  '["REQ", 42, ' + nothing + ']',
  '["CLOSE"]',
  '["COUNT"]',
  '["AUTH", 7]',
  '["NO-SUCH-VERB", "x"]',
  '['.repeat(5000) + ']'.repeat(5000),
  '["EVENT", ' + '{"a":'.repeat(2000) + '1' + '}'.repeat(2000) + ']',
  '["REQ", "s", {"limit": 1e400}]',
  '["REQ","s",' + nothing + '] trailing',
];

test('malformed frames are answered, keep that connection usable and disturb no one else', async (t) => {
  const watcher = await connect();
  const u = newUser();
  const state = live(watcher, [{ authors: [u.pk] }]);
  await state.eosePromise;
  const bad = await RawClient.open();
  let i = 0;
  for (const frame of malformed) {
    i++;
    bad.messages.length = 0;
    bad.send(frame);
    const sentinel = await bad.req('sentinel' + i, [{ ids: ['0'.repeat(64)] }]);
    bad.send(['CLOSE', 'sentinel' + i]);
    const label = frame.length > 60 ? frame.slice(0, 60) + '…' : frame;
    t.ok(sentinel.end && sentinel.end[0] === 'EOSE', `after ${label}: connection still serves REQ`, sentinel.end || (bad.isClosed ? 'closed' : 'no answer'));
    if (!sentinel.end) break;
    const answers = bad.messages.filter((m) => ['NOTICE', 'OK', 'CLOSED'].includes(m[0]));
    t.ok(answers.length > 0, `${label}: answered with NOTICE, OK false or CLOSED`, bad.messages);
    for (const a of answers) {
      const text = a[0] === 'NOTICE' ? a[1] : a[0] === 'OK' ? a[3] : a[2];
      t.ok(a[0] !== 'OK' || a[2] === false, `${label}: OK is false`, a);
      t.ok(typeof text === 'string' && text.trim().length > 0, `${label}: answer has text`, a);
      if (a[0] !== 'NOTICE') expectPrefix(t, text, ['invalid:', 'error:', 'blocked:', 'restricted:'], label);
    }
  }
  const bin = await RawClient.open();
  bin.ws.send(Buffer.from([0, 1, 2, 3, 255]), { binary: true });
  await Promise.race([bin.closed, bin.next((m) => m[0] === 'NOTICE', 5000)]);
  const pub = await connect();
  const e = u.event({ content: 'after the garbage' });
  t.ok((await publish(pub, e)).ok, 'publish after the garbage');
  await pollUntil(() => state.events.length > 0, 10000);
  t.equal(state.events.map((x) => x.id), [e.id], 'the watcher\'s subscription still works');
  bad.close();
  bin.close();
  watcher.close();
  pub.close();
});

await run();
