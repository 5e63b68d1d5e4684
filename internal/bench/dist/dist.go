// Package dist owns the id distributions latch bench draws from: uniform, Zipf, Pareto
// (the 80/20 rule) and a daily-active-users sample. A Spec is immutable and shared; each
// worker makes its own Sampler over its own random source, so drawing takes no lock and
// allocates nothing.
package dist

import (
	"fmt"
	"math"
	"math/rand/v2"
)

// Kinds of distribution a Spec may name.
const (
	Uniform = "uniform"
	Zipf    = "zipf"
	Pareto  = "pareto"
	DAU     = "dau"
)

// ParetoAlpha80 is the Pareto shape for which the top 20% of ids draw 80% of the
// samples: log(5)/log(4).
var ParetoAlpha80 = math.Log(5) / math.Log(4)

// Spec describes a distribution over the ids [0, N).
type Spec struct {
	Kind string
	// N is the size of the id space.
	N int
	// S is Zipf's exponent (> 1; default 1.1).
	S float64
	// Alpha is Pareto's shape (> 0; default ParetoAlpha80).
	Alpha float64
	// Factor is the DAU sampling factor in (0, 1]: ids 0, 1/Factor, 2/Factor, ... are
	// the active ones, and draws are uniform over them.
	Factor float64
	// Seed picks the permutation that maps popularity ranks to ids for Zipf and Pareto,
	// so that the popular ids are not the low ones.
	Seed uint64
}

// Validate reports what is wrong with s, after defaults.
func (s Spec) Validate() error {
	s = s.WithDefaults()
	if s.N <= 0 {
		return fmt.Errorf("%s distribution needs n > 0, got %d", s.Kind, s.N)
	}
	switch s.Kind {
	case Uniform:
	case Zipf:
		if !(s.S > 1) {
			return fmt.Errorf("zipf exponent s must be > 1, got %g", s.S)
		}
	case Pareto:
		if !(s.Alpha > 0) {
			return fmt.Errorf("pareto alpha must be > 0, got %g", s.Alpha)
		}
	case DAU:
		if !(s.Factor > 0 && s.Factor <= 1) {
			return fmt.Errorf("dau factor must be in (0, 1], got %g", s.Factor)
		}
	default:
		return fmt.Errorf("unknown distribution %q (want uniform, zipf, pareto or dau)", s.Kind)
	}
	return nil
}

// WithDefaults fills unset parameters.
func (s Spec) WithDefaults() Spec {
	if s.Kind == Zipf && s.S == 0 {
		s.S = 1.1
	}
	if s.Kind == Pareto && s.Alpha == 0 {
		s.Alpha = ParetoAlpha80
	}
	return s
}

// Sampler draws ids. It is not safe for concurrent use: give each goroutine its own.
type Sampler interface {
	Next() int
}

// New returns a sampler of s drawing from r. s must be valid.
func (s Spec) New(r *rand.Rand) Sampler {
	s = s.WithDefaults()
	perm := newAffine(s.N, s.Seed)
	switch s.Kind {
	case Zipf:
		if s.N == 1 {
			return constant(0)
		}
		return &zipfSampler{z: rand.NewZipf(r, s.S, 1, uint64(s.N-1)), perm: perm}
	case Pareto:
		return newPareto(r, s.N, s.Alpha, perm)
	case DAU:
		step := max(1, int(math.Round(1/s.Factor)))
		return &dauSampler{r: r, step: step, count: (s.N + step - 1) / step}
	}
	return &uniformSampler{r: r, n: s.N}
}

type constant int

func (c constant) Next() int { return int(c) }

type uniformSampler struct {
	r *rand.Rand
	n int
}

func (u *uniformSampler) Next() int { return u.r.IntN(u.n) }

type zipfSampler struct {
	z    *rand.Zipf
	perm affine
}

func (z *zipfSampler) Next() int { return z.perm.at(int(z.z.Uint64())) }

type dauSampler struct {
	r           *rand.Rand
	step, count int
}

func (d *dauSampler) Next() int { return d.step * d.r.IntN(d.count) }

// paretoSampler draws popularity ranks whose weights follow the rank-size rule of a
// Pareto population: weight(x) ∝ (x+1)^(-beta) over the continuous ranks [0, n). Its
// cumulative weight G inverts in closed form, so no table of n weights is kept. beta is
// calibrated for n so that the top 20% of ranks get the share a Pareto(alpha) population
// gives its top 20%, 0.2^(1-1/alpha) (80% for ParetoAlpha80), at every size.
type paretoSampler struct {
	r     *rand.Rand
	n     int
	omb   float64 // 1 - beta
	total float64 // G(n)
	perm  affine
}

func newPareto(r *rand.Rand, n int, alpha float64, perm affine) *paretoSampler {
	want := math.Pow(0.2, 1-1/alpha)
	lo, hi := -4.0, 0.9999
	for range 80 {
		omb := (lo + hi) / 2
		if cumWeight(float64(n)/5, omb)/cumWeight(float64(n), omb) < want {
			hi = omb // too flat: more skew needs a smaller 1-beta
		} else {
			lo = omb
		}
	}
	omb := (lo + hi) / 2
	if math.Abs(omb) < 1e-9 {
		omb = 1e-9
	}
	return &paretoSampler{r: r, n: n, omb: omb, total: cumWeight(float64(n), omb), perm: perm}
}

// cumWeight is G(x) = ((x+1)^omb - 1) / omb, the integral of (t+1)^(-beta) from 0 to x.
func cumWeight(x, omb float64) float64 {
	if math.Abs(omb) < 1e-9 {
		return math.Log1p(x)
	}
	return (math.Pow(x+1, omb) - 1) / omb
}

func (p *paretoSampler) Next() int {
	x := math.Pow(1+p.r.Float64()*p.total*p.omb, 1/p.omb) - 1
	rank := min(max(int(x), 0), p.n-1)
	return p.perm.at(rank)
}

// affine is the permutation rank -> (a*rank + b) mod n with gcd(a, n) = 1: a bijection
// that scatters popular ranks over the id space without a table.
type affine struct{ a, b, n uint64 }

func newAffine(n int, seed uint64) affine {
	if n <= 1 {
		return affine{a: 1, n: 1}
	}
	r := rand.New(rand.NewPCG(seed, 0xaff1e))
	un := uint64(n)
	a := r.Uint64N(un-1) + 1
	for gcd(a, un) != 1 {
		a = a%(un-1) + 1
	}
	return affine{a: a, b: r.Uint64N(un), n: un}
}

func (p affine) at(rank int) int {
	return int((mulMod(p.a, uint64(rank), p.n) + p.b) % p.n)
}

// mulMod returns a*b mod n without overflow for any 64-bit values.
func mulMod(a, b, n uint64) uint64 {
	if a < 1<<32 && b < 1<<32 {
		return a * b % n
	}
	var res uint64
	a %= n
	for b > 0 {
		if b&1 == 1 {
			res = (res + a) % n
		}
		a = (a * 2) % n
		b >>= 1
	}
	return res
}

func gcd(a, b uint64) uint64 {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}
