package invocation

// Response is what the host expects back from an invocation, always with
// Content-Type: application/json. A non-2xx status fails the invocation (the
// host abandons the message) and its Logs are lost.
type Response struct {
	Outputs     map[string]any `json:"Outputs"`
	Logs        []string       `json:"Logs"`
	ReturnValue any            `json:"ReturnValue"`
	// Error is not read by the host; it makes failed calls self-explanatory in traces.
	Error string `json:"Error,omitempty"`
}

// HTTPResponse is the value of an HTTP output binding ("res").
type HTTPResponse struct {
	StatusCode int               `json:"statusCode"`
	Body       string            `json:"body"`
	Headers    map[string]string `json:"headers"`
}
