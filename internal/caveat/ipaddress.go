package caveat

import (
	"fmt"
	"net/netip"
	"reflect"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
)

// ipType is the CEL type of ipaddress parameters. It is opaque: expressions can only
// compare addresses and ask whether one lies in a CIDR range.
var ipType = cel.OpaqueType("ipaddress")

// IP is the value of an ipaddress parameter. It is a CEL value, so converted
// contexts hand it to the interpreter as is.
type IP struct {
	Addr netip.Addr
}

// ParseIPAddress parses an IPv4 or IPv6 address.
func ParseIPAddress(s string) (IP, error) {
	a, err := netip.ParseAddr(s)
	if err != nil {
		return IP{}, fmt.Errorf("%q is not an IP address", s)
	}
	return IP{a}, nil
}

// String returns the address in its standard form.
func (ip IP) String() string { return ip.Addr.String() }

// ConvertToNative lets CEL turn the address into a Go string.
func (ip IP) ConvertToNative(t reflect.Type) (any, error) {
	switch t {
	case reflect.TypeFor[string]():
		return ip.Addr.String(), nil
	case reflect.TypeFor[IP]():
		return ip, nil
	}
	return nil, fmt.Errorf("cannot convert ipaddress to %v", t)
}

// ConvertToType supports string() and type() on addresses.
func (ip IP) ConvertToType(t ref.Type) ref.Val {
	switch t {
	case types.StringType:
		return types.String(ip.Addr.String())
	case types.TypeType:
		return ipType
	}
	return types.NewErr("cannot convert ipaddress to %s", t.TypeName())
}

// Equal compares two addresses; comparing with anything else is a CEL error.
func (ip IP) Equal(other ref.Val) ref.Val {
	o, ok := other.(IP)
	if !ok {
		return types.MaybeNoSuchOverloadErr(other)
	}
	return types.Bool(ip.Addr == o.Addr)
}

// Type returns the CEL ipaddress type.
func (ip IP) Type() ref.Type { return ipType }

// Value returns the address itself.
func (ip IP) Value() any { return ip }

// ipFunctions declares `ipaddress(string)` and `addr.in_cidr(string)`, SpiceDB's
// built-ins for IP allow-lists.
func ipFunctions() []cel.EnvOption {
	return []cel.EnvOption{
		cel.Function("ipaddress",
			cel.Overload("ipaddress_string", []*cel.Type{cel.StringType}, ipType,
				cel.UnaryBinding(func(v ref.Val) ref.Val {
					s, ok := v.(types.String)
					if !ok {
						return types.MaybeNoSuchOverloadErr(v)
					}
					ip, err := ParseIPAddress(string(s))
					if err != nil {
						return types.NewErr("%v", err)
					}
					return ip
				}))),
		cel.Function("in_cidr",
			cel.MemberOverload("ipaddress_in_cidr_string", []*cel.Type{ipType, cel.StringType}, cel.BoolType,
				cel.BinaryBinding(inCIDR))),
	}
}

func inCIDR(lhs, rhs ref.Val) ref.Val {
	ip, ok := lhs.(IP)
	if !ok {
		return types.MaybeNoSuchOverloadErr(lhs)
	}
	s, ok := rhs.(types.String)
	if !ok {
		return types.MaybeNoSuchOverloadErr(rhs)
	}
	prefix, err := netip.ParsePrefix(string(s))
	if err != nil {
		return types.NewErr("%q is not a CIDR range like 10.0.0.0/8", string(s))
	}
	return types.Bool(prefix.Contains(ip.Addr))
}
