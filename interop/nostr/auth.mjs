// NIP-42 AUTH for an operator-configured kind (options.authKind), with
// nostr-tools' auth() and with raw frames for the refusals.
import { finalizeEvent } from 'nostr-tools/pure';
import { makeAuthEvent } from 'nostr-tools/nip42';
import { test, run, relayURL, options, newUser, now, connect, publish, query, ClosedError, pollUntil, expectPrefix, RawClient } from './harness.mjs';

const kind = options.authKind;

// challengeOf waits for the relay's ["AUTH", challenge]; if the relay did not
// send one on connect, it is expected with the first auth-required answer.
async function challengeOf(c) {
  const m = await c.next((x) => x[0] === 'AUTH', 10000);
  return m && m[1];
}

test('publishing and reading the configured kind need AUTH', async (t) => {
  const c = await RawClient.open();
  const u = newUser();
  const e = u.event({ kind, content: 'needs auth' });
  c.send(['EVENT', e]);
  const ok = await c.ok(e.id);
  t.ok(ok && ok[2] === false, 'OK false before AUTH', ok);
  if (ok) expectPrefix(t, ok[3], 'auth-required:', 'publish before AUTH');
  const q = await c.req('dm', [{ kinds: [kind], authors: [u.pk] }]);
  t.ok(q.end && q.end[0] === 'CLOSED', 'REQ for the kind is CLOSED before AUTH', q.end);
  if (q.end && q.end[0] === 'CLOSED') expectPrefix(t, q.end[2], 'auth-required:', 'REQ before AUTH');
  t.ok(await challengeOf(c), 'relay sent an AUTH challenge');
  const free = u.event({ kind: 1, content: 'kind 1 needs no auth' });
  c.send(['EVENT', free]);
  const ok1 = await c.ok(free.id);
  t.ok(ok1 && ok1[2] === true, 'other kinds need no AUTH', ok1);
  c.close();
});

test('bad AUTH events are refused', async (t) => {
  const c = await RawClient.open();
  const u = newUser();
  const probe = u.event({ kind, content: 'probe' });
  c.send(['EVENT', probe]);
  await c.ok(probe.id);
  const challenge = await challengeOf(c);
  t.ok(challenge, 'challenge received');
  const sign = (tmpl) => finalizeEvent(tmpl, u.sk);
  const cases = [
    ['wrong challenge', sign({ ...makeAuthEvent(relayURL, 'not-the-challenge'), created_at: now() })],
    ['wrong relay URL', sign({ ...makeAuthEvent('wss://elsewhere.example.org/', challenge), created_at: now() })],
    ['created an hour ago', sign({ ...makeAuthEvent(relayURL, challenge), created_at: now() - 3600 })],
    ['wrong kind', sign({ ...makeAuthEvent(relayURL, challenge), kind: 22243, created_at: now() })],
    ['bad signature', { ...sign({ ...makeAuthEvent(relayURL, challenge), created_at: now() }), sig: '00'.repeat(64) }],
  ];
  for (const [name, ev] of cases) {
    c.send(['AUTH', ev]);
    const ok = await c.ok(ev.id);
    t.ok(ok && ok[2] === false, `${name}: OK false`, ok);
    if (ok) t.ok(typeof ok[3] === 'string' && /^[a-z-]+: \S/.test(ok[3]), `${name}: refusal has a NIP-01 prefix and text`, ok[3]);
  }
  c.send(['EVENT', probe]);
  const still = await c.ok(probe.id);
  t.ok(still && still[2] === false, 'still not authenticated after bad AUTH events', still);
  c.close();
});

test('nostr-tools auth(): then publishing and reading the kind work', async (t) => {
  const relay = await connect();
  const u = newUser();
  const e = u.event({ kind, content: 'after auth', tags: [['p', u.pk]] });
  const before = await publish(relay, e);
  t.ok(!before.ok, 'refused before auth', before);
  expectPrefix(t, before.message, 'auth-required:', 'refusal before auth');
  t.ok(await pollUntil(() => relay.challenge, 10000), 'nostr-tools saw the challenge');
  const authReply = await relay.auth(async (tmpl) => finalizeEvent(tmpl, u.sk));
  t.ok(typeof authReply === 'string', 'AUTH accepted (OK true)', authReply);
  const after = await publish(relay, e);
  t.ok(after.ok, 'publish after auth', after);
  let got = [];
  try {
    got = await query(relay, [{ kinds: [kind], authors: [u.pk] }]);
  } catch (err) {
    t.ok(false, 'REQ after auth was refused', err instanceof ClosedError ? err.reason : String(err));
  }
  t.equal(got.map((x) => x.id), [e.id], 'REQ after auth returns the event');
  relay.close();
});

test('COUNT of the configured kind needs AUTH too', async (t) => {
  const c = await RawClient.open();
  c.send(['COUNT', 'cnt', { kinds: [kind] }]);
  const m = await c.next((x) => x[1] === 'cnt');
  t.ok(m && m[0] === 'CLOSED', 'COUNT before AUTH is CLOSED, not counted', m);
  if (m && m[0] === 'CLOSED') expectPrefix(t, m[2], 'auth-required:', 'COUNT before AUTH');
  c.close();
});

test('events of the configured kind are served only to their author or p-tagged key', async (t) => {
  const author = newUser();
  const recipient = newUser();
  const stranger = newUser();
  const authed = async (user) => {
    const relay = await connect();
    await publish(relay, user.event({ kind, content: 'probe' }));
    if (!(await pollUntil(() => relay.challenge, 10000))) throw new Error('no challenge');
    await relay.auth(async (tmpl) => finalizeEvent(tmpl, user.sk));
    return relay;
  };
  const a = await authed(author);
  const dm = author.event({ kind, content: 'for the recipient only', tags: [['p', recipient.pk]] });
  t.ok((await publish(a, dm)).ok, 'author publishes');
  const note = author.event({ kind: 1, content: 'public note' });
  t.ok((await publish(a, note)).ok, 'author publishes a public note');
  a.close();

  const anon = await connect();
  let got = await query(anon, [{ authors: [author.pk] }]);
  t.equal(got.map((e) => e.id), [note.id], 'unauthenticated REQ without kinds: only the public note');
  got = await query(anon, [{ ids: [dm.id] }]);
  t.equal(got, [], 'unauthenticated REQ by id: nothing');
  anon.close();

  const s = await authed(stranger);
  try {
    got = await query(s, [{ kinds: [kind], authors: [author.pk] }]);
  } catch (err) {
    got = [];
    t.ok(err instanceof ClosedError, 'stranger: CLOSED is fine', String(err));
  }
  t.equal(got, [], 'an authenticated stranger does not get it');
  s.close();

  const r = await authed(recipient);
  got = await query(r, [{ kinds: [kind], '#p': [recipient.pk] }]);
  t.equal(got.map((e) => e.id), [dm.id], 'the p-tagged recipient gets it');
  r.close();
});

if (options.publicURL) {
  test('AUTH naming the configured public relay URL is accepted', async (t) => {
    const c = await RawClient.open();
    const u = newUser();
    const challenge = await challengeOf(c);
    t.ok(challenge, 'challenge received on connect');
    const ev = finalizeEvent({ ...makeAuthEvent(options.publicURL, challenge), created_at: now() }, u.sk);
    c.send(['AUTH', ev]);
    const ok = await c.ok(ev.id);
    t.ok(ok && ok[2] === true, 'OK true for the public URL', ok);
    const e = u.event({ kind, content: 'after auth by public URL' });
    c.send(['EVENT', e]);
    const pub = await c.ok(e.id);
    t.ok(pub && pub[2] === true, 'then the configured kind can be published', pub);
    c.close();
  });
}

await run();
