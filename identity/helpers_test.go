package identity

import "crypto/ecdh"

func x25519Base(scalar []byte) ([]byte, error) {
	k, err := ecdh.X25519().NewPrivateKey(scalar)
	if err != nil {
		return nil, err
	}
	return k.PublicKey().Bytes(), nil
}
