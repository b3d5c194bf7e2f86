package mediation

// GrantBody is a mediate-grant's body.
type GrantBody struct {
	RoutingDID []string `json:"routing_did"`
}

// RecipientUpdateBody is a recipient-update's body.
type RecipientUpdateBody struct {
	Updates []Update `json:"updates"`
}

// Update adds or removes a recipient DID.
type Update struct {
	RecipientDID string `json:"recipient_did"`
	Action       string `json:"action"` // "add" or "remove"
}

// RecipientUpdateResponseBody is a recipient-update-response's body.
type RecipientUpdateResponseBody struct {
	Updated []UpdateResult `json:"updated"`
}

// UpdateResult is the outcome of one update: success, no_change,
// client_error or server_error.
type UpdateResult struct {
	RecipientDID string `json:"recipient_did"`
	Action       string `json:"action"`
	Result       string `json:"result"`
}

// RecipientBody is a recipient message's body (the answer to
// recipient-query).
type RecipientBody struct {
	Dids []RecipientDID `json:"dids"`
}

// RecipientDID names one registered recipient.
type RecipientDID struct {
	RecipientDID string `json:"recipient_did"`
}

// StatusBody is a pickup status's body.
type StatusBody struct {
	RecipientDID       string `json:"recipient_did,omitempty"`
	MessageCount       int    `json:"message_count"`
	TotalBytes         int64  `json:"total_bytes,omitempty"`
	OldestReceivedTime int64  `json:"oldest_received_time,omitempty"`
	LiveDelivery       bool   `json:"live_delivery"`
}

// DeliveryRequestBody is a delivery-request's body.
type DeliveryRequestBody struct {
	Limit        int    `json:"limit"`
	RecipientDID string `json:"recipient_did,omitempty"`
}

// DeliveryBody is a delivery's body; the messages are its attachments.
type DeliveryBody struct {
	RecipientDID string `json:"recipient_did,omitempty"`
}

// MessagesReceivedBody acknowledges delivered messages by attachment id.
type MessagesReceivedBody struct {
	MessageIDList []string `json:"message_id_list"`
}
