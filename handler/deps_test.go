package handler

import "github.com/convoy-dev/convoy/handler/orders"

// OrdersDeps is d serving the order domain alone, on the ports of o (whose
// Rules it sets): the server the tests written before domains built.
func OrdersDeps(d Deps, o Domain) Deps {
	o.Rules = orders.Domain
	d.Domains = []Domain{o}
	return d
}
