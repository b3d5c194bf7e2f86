package descriptor

import (
	"errors"
	"testing"
)

func TestIrohRelayOfferValidate(t *testing.T) {
	for _, c := range []struct {
		o    IrohRelayOffer
		want error
	}{
		{IrohRelayOffer{URL: "https://anchor.example/", MaxClients: 10, BytesPerSecond: 1}, nil},
		{IrohRelayOffer{URL: "wss://anchor.example/", MaxClients: 10, BytesPerSecond: 1}, ErrBadAddress},
		{IrohRelayOffer{URL: "https://anchor.example/", MaxClients: 0, BytesPerSecond: 1}, ErrBadOffer},
	} {
		o := Offers{IrohRelay: &c.o}
		if err := o.validate(); !errors.Is(err, c.want) {
			t.Errorf("%+v: err %v, want %v", c.o, err, c.want)
		}
	}
}
