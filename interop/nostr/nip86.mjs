// NIP-86 relay management with NIP-98 authorization built by nostr-tools:
// the admin (options.adminSecret, listed in the node's [manage] admins)
// bans and unbans a pubkey, and the relay refuses calls with a wrong
// payload hash, a stale time or an unlisted key with 401/403.
import { finalizeEvent } from 'nostr-tools/pure';
import { getToken } from 'nostr-tools/nip98';
import { test, run, newUser, connect, publish, query, options, relayURL, now, expectPrefix } from './harness.mjs';

const httpURL = relayURL.replace(/^ws/, 'http');
const adminSecret = Uint8Array.from(Buffer.from(options.adminSecret, 'hex'));

// call POSTs a NIP-86 request; auth is the Authorization header or a
// function of the body making one.
async function call(payload, auth) {
  const body = JSON.stringify(payload);
  const headers = { 'Content-Type': 'application/nostr+json+rpc' };
  const a = typeof auth === 'function' ? await auth(body) : auth;
  if (a) headers.Authorization = a;
  const resp = await fetch(httpURL, { method: 'POST', headers, body });
  const text = await resp.text();
  let json;
  try { json = JSON.parse(text); } catch { json = { unparsed: text }; }
  return { status: resp.status, json };
}

const asAdmin = (payload) => getToken(httpURL, 'POST', (e) => finalizeEvent(e, adminSecret), true, payload);

async function admin(method, params = []) {
  const payload = { method, params };
  return call(payload, await asAdmin(payload));
}

test('supportedmethods lists ban and unban', async (t) => {
  const r = await admin('supportedmethods');
  t.equal(r.status, 200, 'status');
  for (const m of ['banpubkey', 'unbanpubkey', 'listbannedpubkeys']) t.ok(r.json.result.includes(m), 'lists ' + m, r.json);
});

test('a banned pubkey is refused with blocked:, and accepted again once unbanned', async (t) => {
  const spammer = newUser();
  const relay = await connect();
  const first = spammer.event({ content: 'before the ban' });
  t.ok((await publish(relay, first)).ok, 'accepted before the ban');

  let r = await admin('banpubkey', [spammer.pk, 'spam']);
  t.equal([r.status, r.json.result], [200, true], 'banpubkey');
  r = await admin('listbannedpubkeys');
  t.ok(r.json.result.some((x) => x.pubkey === spammer.pk && x.reason === 'spam'), 'listed with its reason', r.json);

  const during = spammer.event({ content: 'during the ban' });
  const p = await publish(relay, during);
  t.ok(!p.ok, 'OK false while banned', p);
  expectPrefix(t, p.message, 'blocked:', 'banned author');
  t.equal(await query(relay, [{ ids: [during.id] }]), [], 'not stored');

  r = await admin('unbanpubkey', [spammer.pk]);
  t.equal([r.status, r.json.result], [200, true], 'unbanpubkey');
  const after = spammer.event({ content: 'after the ban' });
  t.ok((await publish(relay, after)).ok, 'accepted after unban');
  relay.close();
});

test('a wrong payload hash is refused with 401', async (t) => {
  const payload = { method: 'banpubkey', params: [newUser().pk] };
  const other = { method: 'supportedmethods', params: [] };
  const r = await call(payload, await asAdmin(other));
  t.equal(r.status, 401, 'status');
  t.ok(typeof r.json.error === 'string' && r.json.error.length > 0, 'says why', r.json);
});

test('a stale authorization is refused with 401', async (t) => {
  const payload = { method: 'listbannedpubkeys', params: [] };
  const r = await call(payload, async () => {
    // nostr-tools stamps the time itself: sign the same event ten minutes old.
    const token = await getToken(httpURL, 'POST', (e) => finalizeEvent({ ...e, created_at: now() - 600 }, adminSecret), true, payload);
    return token;
  });
  t.equal(r.status, 401, 'status');
});

test('a key the operator did not list is refused with 403', async (t) => {
  const stranger = newUser();
  const payload = { method: 'banpubkey', params: [newUser().pk] };
  const r = await call(payload, await getToken(httpURL, 'POST', (e) => finalizeEvent(e, stranger.sk), true, payload));
  t.equal(r.status, 403, 'status');
});

test('no authorization at all is refused with 401', async (t) => {
  const r = await call({ method: 'supportedmethods', params: [] }, null);
  t.equal(r.status, 401, 'status');
});

run();
