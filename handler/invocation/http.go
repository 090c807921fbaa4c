package invocation

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"mime"
	"net/http"
	"strings"
)

// HTTPRequest is the Data.req object of an HTTP trigger invoked without
// request forwarding.
type HTTPRequest struct {
	Method  string
	Query   map[string]string
	Headers http.Header
	Params  map[string]string // route parameters
	Body    []byte
}

type wireHTTPRequest struct {
	Method  string                     `json:"Method"`
	Query   map[string]json.RawMessage `json:"Query"`
	Headers map[string]json.RawMessage `json:"Headers"`
	Params  map[string]json.RawMessage `json:"Params"`
	Body    json.RawMessage            `json:"Body"`
}

// HTTPRequest returns the HTTP request bound to binding (e.g. "req").
func (r *Request) HTTPRequest(binding string) (HTTPRequest, error) {
	raw, ok := lookup(r.Data, binding)
	if !ok {
		return HTTPRequest{}, fmt.Errorf("no %q binding in Data", binding)
	}
	// A real JSON object, or (if the host ever sends it so) a string holding one.
	if t := bytes.TrimSpace(raw); len(t) > 0 && t[0] == '"' {
		inner, err := DecodeString(t)
		if err != nil {
			return HTTPRequest{}, fmt.Errorf("binding %s: %w", binding, err)
		}
		raw = json.RawMessage(inner)
	}
	var w wireHTTPRequest
	if t := bytes.TrimSpace(raw); len(t) == 0 || t[0] != '{' {
		return HTTPRequest{}, fmt.Errorf("binding %s: value is not a JSON object", binding)
	}
	err := json.Unmarshal(raw, &w)
	if err != nil {
		return HTTPRequest{}, fmt.Errorf("binding %s: %w", binding, err)
	}
	req := HTTPRequest{
		Method:  strings.ToUpper(w.Method),
		Query:   map[string]string{},
		Headers: http.Header{},
		Params:  map[string]string{},
	}
	for k, v := range w.Query {
		if req.Query[k], err = DecodeString(v); err != nil {
			return HTTPRequest{}, fmt.Errorf("binding %s, Query %s: %w", binding, k, err)
		}
	}
	for k, v := range w.Params {
		if req.Params[k], err = DecodeString(v); err != nil {
			return HTTPRequest{}, fmt.Errorf("binding %s, Params %s: %w", binding, k, err)
		}
	}
	for k, v := range w.Headers {
		values, err := headerValues(v)
		if err != nil {
			return HTTPRequest{}, fmt.Errorf("binding %s, Headers %s: %w", binding, k, err)
		}
		for _, s := range values {
			req.Headers.Add(k, s)
		}
	}
	if !isNull(w.Body) {
		// Within Data.req strings are encoded once; a JSON body may also come as an object.
		if w.Body[0] == '"' {
			var s string
			if err := json.Unmarshal(w.Body, &s); err != nil {
				return HTTPRequest{}, fmt.Errorf("binding %s, Body: %w", binding, err)
			}
			req.Body = []byte(s)
			if binaryBody(req.Headers.Get("Content-Type")) {
				// The host sends octet-stream and multipart bodies base64-encoded.
				if req.Body, err = base64.StdEncoding.DecodeString(s); err != nil {
					return HTTPRequest{}, fmt.Errorf("binding %s, Body: a %s body is not base64: %w", binding, req.Headers.Get("Content-Type"), err)
				}
			}
		} else {
			req.Body = w.Body
		}
	}
	return req, nil
}

func binaryBody(contentType string) bool {
	mt, _, _ := mime.ParseMediaType(contentType)
	return mt == "application/octet-stream" || strings.HasPrefix(mt, "multipart/")
}

// Headers arrive as arrays of strings; tolerate a single string.
func headerValues(raw json.RawMessage) ([]string, error) {
	var many []string
	if err := json.Unmarshal(raw, &many); err == nil {
		return many, nil
	}
	s, err := DecodeString(raw)
	if err != nil {
		return nil, err
	}
	return []string{s}, nil
}

// Param returns the route parameter name from Data.req.Params, falling back to
// Metadata, where the host also puts route parameters.
func (r *Request) Param(req HTTPRequest, name string) string {
	if v := req.Params[name]; v != "" {
		return v
	}
	s, _, _ := r.MetadataString(name)
	return s
}
