package wire

// ErrorBody is the JSON shape of an error; null fields stay null.
type ErrorBody struct {
	Error ErrorObject `json:"error"`
}

// ErrorObject is an error answer's object; an empty Param or Code is
// sent as null.
type ErrorObject struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
}
