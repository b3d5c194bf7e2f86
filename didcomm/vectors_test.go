package didcomm

import (
	"bytes"
	"crypto/ecdh"
	"crypto/ed25519"
	"encoding/hex"
	"encoding/json"
	"testing"
	"time"
)

// draft-madden-jose-ecdh-1pu-04 Appendix B: Alice sends to Bob and Charlie
// with ECDH-1PU+A128KW and A256CBC-HS512; the key-wrap KDF includes the
// content tag.
func TestECDH1PUDraftAppendixB(t *testing.T) {
	key := func(x, d string) *ecdh.PrivateKey {
		t.Helper()
		k, err := PrivateKeyFromJWK([]byte(`{"kty":"OKP","crv":"X25519","x":"` + x + `","d":"` + d + `"}`))
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	alice := key("Knbm_BcdQr7WIoz-uqit9M0wbcfEr6y-9UfIZ8QnBD4", "i9KuFhSzEBsiv3PKVL5115OCdsqQai5nj_Flzfkw5jU")
	bob := key("BT7aR0ItXfeDAldeeOlXL_wXqp-j5FltT0vRSG16kRw", "1gDirl_r_Y3-qUa3WXHgEXrrEHngWThU3c9zj9A2uBg")
	charlie := key("q-LsvU772uV_2sPJhfAIq-3vnKNVefNoIlvyvg1hrnE", "Jcv8gklhMjC0b-lsk5onBbppWAx5ncNtbM63Jr9xBQE")
	eph := key("k9of_cpAajy0poW5gaixXGs9nHkwg1AFqUAFa39dyBc", "x8EVZH4Fwk673_mUujnliJoSrLz0zYzzCWp5GUX2fc8")

	protected := b64.EncodeToString([]byte(`{"alg":"ECDH-1PU+A128KW","enc":"A256CBC-HS512","apu":"QWxpY2U","apv":"Qm9iIGFuZCBDaGFybGll","epk":{"kty":"OKP","crv":"X25519","x":"k9of_cpAajy0poW5gaixXGs9nHkwg1AFqUAFa39dyBc"}}`))
	cek, _ := hex.DecodeString("fffefdfcfbfaf9f8f7f6f5f4f3f2f1f0efeeedecebeae9e8e7e6e5e4e3e2e1e0dfdedddcdbdad9d8d7d6d5d4d3d2d1d0cfcecdcccbcac9c8c7c6c5c4c3c2c1c0")
	iv, _ := hex.DecodeString("000102030405060708090a0b0c0d0e0f")

	ct, tag, err := sealContent(EncA256CBCHS512, cek, iv, []byte(protected), []byte("Three is a magic number."))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := b64.EncodeToString(ct), "Az2IWsISEMDJvyc5XRL-3-d-RgNBOGolCsxFFoUXFYw"; got != want {
		t.Fatalf("ciphertext %s, want %s", got, want)
	}
	if got, want := b64.EncodeToString(tag), "HLb4fTlm8spGmij3RyOs2gJ4DpHM4hhVRwdF_hGb3WQ"; got != want {
		t.Fatalf("tag %s, want %s", got, want)
	}
	for _, tc := range []struct {
		name    string
		to      *ecdh.PrivateKey
		wantKey string
	}{
		{"bob", bob, "pOMVA9_PtoRe7xXW1139NzzN1UhiFoio8lGto9cf0t8PyU-sjNXH8-LIRLycq8CHJQbDwvQeU1cSl55cQ0hGezJu2N9IY0QN"},
		{"charlie", charlie, "56GVudgRLIMEElQ7DpXsijJVRSWUSDNdbWkdV3g0GUNq6hcT_GkxwnxlPIWrTXCqRpVKQC8fe4z3PQ2YH2afvjQ28aiCTWFE"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			z, err := sharedZ(eph, tc.to.PublicKey(), alice)
			if err != nil {
				t.Fatal(err)
			}
			kek, err := deriveKEK("ECDH-1PU+A128KW", z, []byte("Alice"), []byte("Bob and Charlie"), tag)
			if err != nil {
				t.Fatal(err)
			}
			wk, err := wrap(kek, cek)
			if err != nil {
				t.Fatal(err)
			}
			if got := b64.EncodeToString(wk); got != tc.wantKey {
				t.Fatalf("encrypted_key %s, want %s", got, tc.wantKey)
			}
			// The recipient's side derives the same Z.
			rz, err := recipientZ(tc.to, eph.PublicKey(), alice.PublicKey())
			if err != nil || !bytes.Equal(rz, z) {
				t.Fatalf("recipient Z differs: %v", err)
			}
			pt, err := openContent(EncA256CBCHS512, cek, iv, []byte(protected), ct, tag)
			if err != nil || string(pt) != "Three is a magic number." {
				t.Fatalf("open: %q %v", pt, err)
			}
		})
	}
}

// The DIDComm spec's appendix keys (also didcomm-rust's test vectors).
func specVectorParties(t *testing.T) (StaticResolver, *Secrets) {
	t.Helper()
	pub := func(j string) *ecdh.PublicKey {
		k, err := PublicKeyFromJWK([]byte(j))
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	priv := func(j string) *ecdh.PrivateKey {
		k, err := PrivateKeyFromJWK([]byte(j))
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	aliceEd, err := b64.DecodeString("G-boxFB6vOZBu-wXkm-9Lh79I8nf9Z50cILaOgKKGww")
	if err != nil {
		t.Fatal(err)
	}
	bob := &Secrets{DID: "did:example:bob", Agreement: []AgreementSecret{
		{ID: "did:example:bob#key-x25519-1", Key: priv(`{"kty":"OKP","crv":"X25519","d":"b9NnuOCB0hm7YGNvaE9DMhwH_wjZA1-gWD6dA0JWdL0","x":"GDTrI66K0pFfO54tlCSvfjjNapIs44dzpneBgyx0S3E"}`)},
		{ID: "did:example:bob#key-x25519-2", Key: priv(`{"kty":"OKP","crv":"X25519","d":"p-vteoF1gopny1HXywt76xz_uC83UUmrgszsI-ThBKk","x":"UT9S3F5ep16KSNBBShU2wh3qSfqYjlasZimn0mB8_VM"}`)},
		{ID: "did:example:bob#key-p256-1", Key: priv(`{"kty":"EC","crv":"P-256","d":"PgwHnlXxt8pwR6OCTUwwWx-P51BiLkFZyqHzquKddXQ","x":"FQVaTOksf-XsCUrt4J1L2UGvtWaDwpboVlqbKBY2AIo","y":"6XFB9PYo7dyC5ViJSO9uXNYkxTJWn0d_mqJ__ZYhcNY"}`)},
	}}
	r := StaticResolver{
		"did:example:alice": {
			DID: "did:example:alice",
			KeyAgreement: []AgreementKey{
				{ID: "did:example:alice#key-x25519-1", Key: pub(`{"kty":"OKP","crv":"X25519","x":"avH0O2Y4tqLAq8y9zpianr8ajii5m4F_mICrzNlatXs"}`)},
				{ID: "did:example:alice#key-p256-1", Key: pub(`{"kty":"EC","crv":"P-256","x":"L0crjMN1g0Ih4sYAJ_nGoHUck2cloltUpUVQDhF2nHE","y":"SxYgE7CmEJYi7IDhgK5jI4ZiajO8jPRZDldVhqFpYoo"}`)},
			},
			Authentication: []SigningKey{{ID: "did:example:alice#key-1", Key: ed25519.PublicKey(aliceEd)}},
		},
	}
	return r, bob
}

const (
	specAnonXC20P = `{"ciphertext":"KWS7gJU7TbyJlcT9dPkCw-ohNigGaHSukR9MUqFM0THbCTCNkY-g5tahBFyszlKIKXs7qOtqzYyWbPou2q77XlAeYs93IhF6NvaIjyNqYklvj-OtJt9W2Pj5CLOMdsR0C30wchGoXd6wEQZY4ttbzpxYznqPmJ0b9KW6ZP-l4_DSRYe9B-1oSWMNmqMPwluKbtguC-riy356Xbu2C9ShfWmpmjz1HyJWQhZfczuwkWWlE63g26FMskIZZd_jGpEhPFHKUXCFwbuiw_Iy3R0BIzmXXdK_w7PZMMPbaxssl2UeJmLQgCAP8j8TukxV96EKa6rGgULvlo7qibjJqsS5j03bnbxkuxwbfyu3OxwgVzFWlyHbUH6p","protected":"eyJlcGsiOnsia3R5IjoiT0tQIiwiY3J2IjoiWDI1NTE5IiwieCI6IkpIanNtSVJaQWFCMHpSR193TlhMVjJyUGdnRjAwaGRIYlc1cmo4ZzBJMjQifSwiYXB2IjoiTmNzdUFuclJmUEs2OUEtcmtaMEw5WFdVRzRqTXZOQzNaZzc0QlB6NTNQQSIsInR5cCI6ImFwcGxpY2F0aW9uL2RpZGNvbW0tZW5jcnlwdGVkK2pzb24iLCJlbmMiOiJYQzIwUCIsImFsZyI6IkVDREgtRVMrQTI1NktXIn0","recipients":[{"encrypted_key":"3n1olyBR3nY7ZGAprOx-b7wYAKza6cvOYjNwVg3miTnbLwPP_FmE1A","header":{"kid":"did:example:bob#key-x25519-1"}},{"encrypted_key":"j5eSzn3kCrIkhQAWPnEwrFPMW6hG0zF_y37gUvvc5gvlzsuNX4hXrQ","header":{"kid":"did:example:bob#key-x25519-2"}},{"encrypted_key":"TEWlqlq-ao7Lbynf0oZYhxs7ZB39SUWBCK4qjqQqfeItfwmNyDm73A","header":{"kid":"did:example:bob#key-x25519-3"}}],"tag":"6ylC_iAs4JvDQzXeY6MuYQ","iv":"ESpmcyGiZpRjc5urDela21TOOTW8Wqd1"}`

	specAnonP256XC20P = `{"ciphertext":"912eTUDRKTzhUUqxosPogT1bs9w9wv4s4HmoWkaeU9Uj92V4ENpk-_ZPNSvPyXYLfFj0nc9V2-ux5jq8hqUd17WJpXEM1ReMUjtnTqeUzVa7_xtfkbfhaOZdL8OfgNquPDH1bYcBshN9O9lMT0V52gmGaAB45k4I2PNHcc0A5XWzditCYi8wOkPDm5A7pA39Au5uUNiFQjRYDrz1YvJwV9cdca54vYsBfV1q4c8ncQsv5tNnFYQ1s4rAG7RbyWdAjkC89kE_hIoRRkWZhFyNSfdvRtlUJDlM19uml7lwBWWPnqkmQ3ubiBGmVct3pjrcDvjissOw8Dwkn4E1V1gafec-jDBy4Rndai_RdGjnXjMJs7nRv3Ot","protected":"eyJlcGsiOnsia3R5IjoiRUMiLCJjcnYiOiJQLTI1NiIsIngiOiJFczdpUDNFaExDSGxBclAwS2NZRmNxRXlCYXByMks2WU9BOVc4ZU84YXU4IiwieSI6Ik42QWw3RVR3Q2RwQzZOamRlY3IyS1hBZzFVZVp5X3VmSFJRS3A5RzZLR2sifSwiYXB2Ijoiei1McXB2VlhEYl9zR1luM21qUUxwdXUyQ1FMZXdZdVpvVFdPSVhQSDNGTSIsInR5cCI6ImFwcGxpY2F0aW9uL2RpZGNvbW0tZW5jcnlwdGVkK2pzb24iLCJlbmMiOiJYQzIwUCIsImFsZyI6IkVDREgtRVMrQTI1NktXIn0","recipients":[{"encrypted_key":"G-UFZ1ebuhlWZTrMj214YcEvHl6hyfsFtWv4hj-NPNi9gpi99rRs3Q","header":{"kid":"did:example:bob#key-p256-1"}},{"encrypted_key":"gVdbFdXAxEgrtj9Uw2xiEucQukpiAOA3Jp7Ecmb6L7G5c3IIcAAHgQ","header":{"kid":"did:example:bob#key-p256-2"}}],"tag":"t8ioLvZhsCp7A93jvdf3wA","iv":"JrIpD5q5ifMq6PT06pYh6QhCQ6LgnGpF"}`

	specAuthX25519 = `{"ciphertext":"MJezmxJ8DzUB01rMjiW6JViSaUhsZBhMvYtezkhmwts1qXWtDB63i4-FHZP6cJSyCI7eU-gqH8lBXO_UVuviWIqnIUrTRLaumanZ4q1dNKAnxNL-dHmb3coOqSvy3ZZn6W17lsVudjw7hUUpMbeMbQ5W8GokK9ZCGaaWnqAzd1ZcuGXDuemWeA8BerQsfQw_IQm-aUKancldedHSGrOjVWgozVL97MH966j3i9CJc3k9jS9xDuE0owoWVZa7SxTmhl1PDetmzLnYIIIt-peJtNYGdpd-FcYxIFycQNRUoFEr77h4GBTLbC-vqbQHJC1vW4O2LEKhnhOAVlGyDYkNbA4DSL-LMwKxenQXRARsKSIMn7z-ZIqTE-VCNj9vbtgR","protected":"eyJlcGsiOnsia3R5IjoiT0tQIiwiY3J2IjoiWDI1NTE5IiwieCI6IkdGY01vcEpsamY0cExaZmNoNGFfR2hUTV9ZQWY2aU5JMWRXREd5VkNhdzAifSwiYXB2IjoiTmNzdUFuclJmUEs2OUEtcmtaMEw5WFdVRzRqTXZOQzNaZzc0QlB6NTNQQSIsInNraWQiOiJkaWQ6ZXhhbXBsZTphbGljZSNrZXkteDI1NTE5LTEiLCJhcHUiOiJaR2xrT21WNFlXMXdiR1U2WVd4cFkyVWphMlY1TFhneU5UVXhPUzB4IiwidHlwIjoiYXBwbGljYXRpb24vZGlkY29tbS1lbmNyeXB0ZWQranNvbiIsImVuYyI6IkEyNTZDQkMtSFM1MTIiLCJhbGciOiJFQ0RILTFQVStBMjU2S1cifQ","recipients":[{"encrypted_key":"o0FJASHkQKhnFo_rTMHTI9qTm_m2mkJp-wv96mKyT5TP7QjBDuiQ0AMKaPI_RLLB7jpyE-Q80Mwos7CvwbMJDhIEBnk2qHVB","header":{"kid":"did:example:bob#key-x25519-1"}},{"encrypted_key":"rYlafW0XkNd8kaXCqVbtGJ9GhwBC3lZ9AihHK4B6J6V2kT7vjbSYuIpr1IlAjvxYQOw08yqEJNIwrPpB0ouDzKqk98FVN7rK","header":{"kid":"did:example:bob#key-x25519-2"}},{"encrypted_key":"aqfxMY2sV-njsVo-_9Ke9QbOf6hxhGrUVh_m-h_Aq530w3e_4IokChfKWG1tVJvXYv_AffY7vxj0k5aIfKZUxiNmBwC_QsNo","header":{"kid":"did:example:bob#key-x25519-3"}}],"tag":"uYeo7IsZjN7AnvBjUZE5lNryNENbf6_zew_VC-d4b3U","iv":"o02OXDQ6_-sKz2PX_6oyJg"}`

	specSigned = `{"payload":"eyJpZCI6IjEyMzQ1Njc4OTAiLCJ0eXAiOiJhcHBsaWNhdGlvbi9kaWRjb21tLXBsYWluK2pzb24iLCJ0eXBlIjoiaHR0cDovL2V4YW1wbGUuY29tL3Byb3RvY29scy9sZXRzX2RvX2x1bmNoLzEuMC9wcm9wb3NhbCIsImZyb20iOiJkaWQ6ZXhhbXBsZTphbGljZSIsInRvIjpbImRpZDpleGFtcGxlOmJvYiJdLCJjcmVhdGVkX3RpbWUiOjE1MTYyNjkwMjIsImV4cGlyZXNfdGltZSI6MTUxNjM4NTkzMSwiYm9keSI6eyJtZXNzYWdlc3BlY2lmaWNhdHRyaWJ1dGUiOiJhbmQgaXRzIHZhbHVlIn19","signatures":[{"protected":"eyJ0eXAiOiJhcHBsaWNhdGlvbi9kaWRjb21tLXNpZ25lZCtqc29uIiwiYWxnIjoiRWREU0EifQ","signature":"FW33NnvOHV0Ted9-F7GZbkia-vYAfBKtH4oBxbrttWAhBZ6UFJMxcGjL3lwOl4YohI3kyyd08LHPWNMgP2EVCQ","header":{"kid":"did:example:alice#key-1"}}]}`
)

func TestSpecAppendixVectors(t *testing.T) {
	r, bob := specVectorParties(t)
	// The vectors' message was created at 1516269022 and expires at
	// 1516385931: unpack at a time between.
	at := func() time.Time { return time.Unix(1516269100, 0) }
	for _, tc := range []struct {
		name                     string
		packed                   string
		mode                     Mode
		enc, sender, signer, rcp string
	}{
		{"anoncrypt X25519 XC20P", specAnonXC20P, ModeAnoncrypt, EncXC20P, "", "", "did:example:bob#key-x25519-1"},
		{"anoncrypt P-256 XC20P", specAnonP256XC20P, ModeAnoncrypt, EncXC20P, "", "", "did:example:bob#key-p256-1"},
		{"authcrypt X25519 A256CBC-HS512", specAuthX25519, ModeAuthcrypt, EncA256CBCHS512, "did:example:alice#key-x25519-1", "", "did:example:bob#key-x25519-1"},
		{"signed EdDSA", specSigned, ModeSigned, "", "", "did:example:alice#key-1", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u := &Unpacker{Secrets: bob, Resolver: r, Now: at}
			got, err := u.Unpack([]byte(tc.packed))
			if err != nil {
				t.Fatal(err)
			}
			m := got.Message
			if m.ID != "1234567890" || m.Type != "http://example.com/protocols/lets_do_lunch/1.0/proposal" || m.From != "did:example:alice" {
				t.Fatalf("message %+v", m)
			}
			var body map[string]string
			if err := json.Unmarshal(m.Body, &body); err != nil || body["messagespecificattribute"] != "and its value" {
				t.Fatalf("body %s", m.Body)
			}
			if got.Mode != tc.mode || got.Enc != tc.enc || got.SenderKID != tc.sender || got.RecipientKID != tc.rcp {
				t.Fatalf("mode %s enc %s sender %s recipient %s", got.Mode, got.Enc, got.SenderKID, got.RecipientKID)
			}
			if (tc.signer != "") != got.NonRepudiable || (tc.signer != "" && got.SignerKIDs[0] != tc.signer) {
				t.Fatalf("signers %v", got.SignerKIDs)
			}
			if got.Authenticated != (tc.sender != "" || tc.signer != "") {
				t.Fatalf("authenticated = %v", got.Authenticated)
			}
			// The same vector after its expiry is refused.
			late := &Unpacker{Secrets: bob, Resolver: r, Now: func() time.Time { return time.Unix(1516385932, 0) }}
			if _, err := late.Unpack([]byte(tc.packed)); problemCode(err) != CodeExpired {
				t.Fatalf("expired vector: %v", err)
			}
		})
	}
}

func problemCode(err error) string {
	if p, ok := err.(*Problem); ok {
		return p.Code
	}
	return ""
}
