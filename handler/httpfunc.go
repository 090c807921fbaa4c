package handler

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"

	"github.com/labstack/echo/v4"

	"github.com/convoy-dev/convoy/handler/fault"
	"github.com/convoy-dev/convoy/handler/invocation"
)

// httpRequest is what an HTTP function sees, however the host delivered it.
type httpRequest struct {
	Method string
	Params map[string]string // route parameters
	Query  url.Values
	Header http.Header
	Body   []byte
}

// httpFunc serves one HTTP function: a status and a JSON-encodable body, or
// an error mapped by statusOf.
type httpFunc func(ctx context.Context, r httpRequest) (status int, body any, err error)

// withHeaders is an httpFunc body that also sets response headers.
type withHeaders struct {
	Body    any
	Headers map[string]string
}

// unwrapHeaders splits a body into what to encode and the headers to set.
func unwrapHeaders(body any) (any, map[string]string) {
	if h, ok := body.(withHeaders); ok {
		return h.Body, h.Headers
	}
	return body, nil
}

// httpFunction registers fn twice: at POST /<name> for the host's envelope
// (Data.req in, Outputs.res out) and at its /api route for request forwarding.
func (s *server) httpFunction(e *echo.Echo, name, method, route string, fn httpFunc) {
	e.Add(method, route, func(ec echo.Context) error {
		r := httpRequest{Method: method, Params: map[string]string{}, Query: ec.QueryParams(), Header: ec.Request().Header}
		for _, p := range ec.ParamNames() {
			r.Params[p] = ec.Param(p)
		}
		var err error
		if method != http.MethodGet {
			if r.Body, err = s.readBody(ec); err != nil {
				return err
			}
		}
		ctx, cancel := s.withDeadline(ec.Request().Context(), name)
		defer cancel()
		status, body, err := fn(ctx, r)
		if err != nil {
			return s.pastDeadline(ctx, name, err) // handleError
		}
		body, headers := unwrapHeaders(body)
		for k, v := range headers {
			ec.Response().Header().Set(k, v)
		}
		if page, ok := body.(htmlPage); ok {
			return ec.HTML(status, string(page))
		}
		return ec.JSON(status, body)
	})
	e.POST("/"+name, s.invocation(name, func(ctx context.Context, c *call) (map[string]any, error) {
		req, err := c.req.HTTPRequest("req")
		if err != nil {
			return nil, fault.Wrap(fault.Invalid, err, "unreadable HTTP trigger payload")
		}
		r := httpRequest{Method: req.Method, Params: map[string]string{}, Query: url.Values{}, Header: req.Headers, Body: req.Body}
		for _, p := range routeParams(route) {
			r.Params[p] = c.req.Param(req, p)
		}
		for k, v := range req.Query {
			r.Query.Set(k, v)
		}
		status, body, err := fn(ctx, r)
		if err != nil {
			status, body = errorResponse(s.pastDeadline(ctx, name, err))
		}
		body, headers := unwrapHeaders(body)
		var res invocation.HTTPResponse
		if page, ok := body.(htmlPage); ok {
			res = invocation.HTTPResponse{StatusCode: status, Body: string(page), Headers: map[string]string{"Content-Type": "text/html; charset=utf-8"}}
		} else {
			text, err := json.Marshal(body)
			if err != nil {
				return nil, fault.Wrap(fault.Internal, err, "encode response")
			}
			res = invocation.HTTPResponse{StatusCode: status, Body: string(text), Headers: map[string]string{"Content-Type": "application/json"}}
		}
		for k, v := range headers {
			res.Headers[k] = v
		}
		return map[string]any{"res": res}, nil
	}))
}

// routeParams lists the :names in an echo route.
func routeParams(route string) []string {
	var names []string
	for i := 0; i < len(route); i++ {
		if route[i] == ':' {
			j := i + 1
			for j < len(route) && route[j] != '/' {
				j++
			}
			names = append(names, route[i+1:j])
			i = j
		}
	}
	return names
}
