package mediation

// Protocol identifiers and message types.
const (
	PIURIMediation = "https://didcomm.org/coordinate-mediation/3.0"
	PIURIPickup    = "https://didcomm.org/messagepickup/3.0"

	TypeMediateRequest          = PIURIMediation + "/mediate-request"
	TypeMediateGrant            = PIURIMediation + "/mediate-grant"
	TypeMediateDeny             = PIURIMediation + "/mediate-deny"
	TypeRecipientUpdate         = PIURIMediation + "/recipient-update"
	TypeRecipientUpdateResponse = PIURIMediation + "/recipient-update-response"
	TypeRecipientQuery          = PIURIMediation + "/recipient-query"
	TypeRecipient               = PIURIMediation + "/recipient"

	TypeStatusRequest      = PIURIPickup + "/status-request"
	TypeStatus             = PIURIPickup + "/status"
	TypeDeliveryRequest    = PIURIPickup + "/delivery-request"
	TypeDelivery           = PIURIPickup + "/delivery"
	TypeMessagesReceived   = PIURIPickup + "/messages-received"
	TypeLiveDeliveryChange = PIURIPickup + "/live-delivery-change"
)

// CodeLiveModeNotSupported is the problem code message pickup 3.0 names
// for a mediator that does not offer live delivery.
const CodeLiveModeNotSupported = "e.m.live-mode-not-supported"

// Push wake (spec/leaf.md § Push wake): a leaf registers a UnifiedPush-style
// endpoint with its mediator, and the mediator POSTs a content-free wake
// to it when a message is queued for the leaf. This is a fleetmesh
// protocol (new): no registered DIDComm protocol registers a push
// endpoint with a mediator.
const (
	PIURIPush          = "https://fleetmesh.org/protocols/push/1.0"
	TypePushRegister   = PIURIPush + "/register"
	TypePushRegistered = PIURIPush + "/registered"
	// TypePushWake is the type named in the body of every wake POST; it
	// is the whole body.
	TypePushWake = PIURIPush + "/wake"
)

// PushRegisterBody is a push register message's body; an empty endpoint
// removes the registration.
type PushRegisterBody struct {
	Endpoint string `json:"endpoint"`
}

// PushWakeBody is the body of every wake POST: only the type, so the push
// service carrying it learns nothing about the message, its sender or how
// many wait.
type PushWakeBody struct {
	Type string `json:"type"`
}
