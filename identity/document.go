package identity

import "fmt"

// Verification method types written into DID documents. The 2020 suites with
// publicKeyMultibase are what the did:key specification's Ed25519 test
// vectors use, and what both digitalbazaar's and SICPA's resolvers read.
const (
	TypeEd25519VerificationKey2020 = "Ed25519VerificationKey2020"
	TypeX25519KeyAgreementKey2020  = "X25519KeyAgreementKey2020"
)

// VerificationMethod is one key in a DID document.
type VerificationMethod struct {
	ID                 string `json:"id"`
	Type               string `json:"type"`
	Controller         string `json:"controller"`
	PublicKeyMultibase string `json:"publicKeyMultibase"`
}

// Document is a DID document as the did:key method produces it: the Ed25519
// key for authentication and assertion, the derived X25519 key for key
// agreement. Relationships list method ids; the methods themselves are in
// VerificationMethod.
type Document struct {
	Context              []string             `json:"@context"`
	ID                   string               `json:"id"`
	VerificationMethod   []VerificationMethod `json:"verificationMethod"`
	Authentication       []string             `json:"authentication"`
	AssertionMethod      []string             `json:"assertionMethod"`
	CapabilityInvocation []string             `json:"capabilityInvocation"`
	CapabilityDelegation []string             `json:"capabilityDelegation"`
	KeyAgreement         []string             `json:"keyAgreement"`
}

// Resolve builds the DID document of a did:key DID of an Ed25519 key. It
// needs no network: the document is a function of the DID.
func Resolve(did string) (*Document, error) {
	pub, err := PublicKeyFromDID(did)
	if err != nil {
		return nil, err
	}
	x, err := X25519PublicFromEd25519(pub)
	if err != nil {
		return nil, fmt.Errorf("identity: %s: %w", did, err)
	}
	did = DIDFromPublicKey(pub)
	edID := did + "#" + MultibaseEd25519(pub)
	xID := did + "#" + MultibaseX25519(x)
	return &Document{
		Context: []string{
			"https://www.w3.org/ns/did/v1",
			"https://w3id.org/security/suites/ed25519-2020/v1",
			"https://w3id.org/security/suites/x25519-2020/v1",
		},
		ID: did,
		VerificationMethod: []VerificationMethod{
			{ID: edID, Type: TypeEd25519VerificationKey2020, Controller: did, PublicKeyMultibase: MultibaseEd25519(pub)},
			{ID: xID, Type: TypeX25519KeyAgreementKey2020, Controller: did, PublicKeyMultibase: MultibaseX25519(x)},
		},
		Authentication:       []string{edID},
		AssertionMethod:      []string{edID},
		CapabilityInvocation: []string{edID},
		CapabilityDelegation: []string{edID},
		KeyAgreement:         []string{xID},
	}, nil
}

// SigningKeyID is the verification method id of a DID's Ed25519 key
// (did:key:z6Mk…#z6Mk…).
func SigningKeyID(did string) (string, error) {
	pub, err := PublicKeyFromDID(did)
	if err != nil {
		return "", err
	}
	return DIDFromPublicKey(pub) + "#" + MultibaseEd25519(pub), nil
}

// KeyAgreementID is the verification method id of a DID's derived X25519
// key (did:key:z6Mk…#z6LS…).
func KeyAgreementID(did string) (string, error) {
	pub, err := PublicKeyFromDID(did)
	if err != nil {
		return "", err
	}
	x, err := X25519PublicFromEd25519(pub)
	if err != nil {
		return "", err
	}
	return DIDFromPublicKey(pub) + "#" + MultibaseX25519(x), nil
}
