package result

import "fmt"

// Units of a step or ceiling run's load levels: what Step.Planned,
// StepLevel.Users, Ceiling.SupportedUsers and a ceiling's levels,
// decisions and check timeline count. A closed-model run's levels are
// users; an open-model run's (step --rates, ceiling --open) are whole
// arrivals per second. Results written before the open model have no
// unit: users.
const (
	UnitUsers = "users"
	UnitRate  = "arrivals/s"
)

// UnitOf is unit, or UnitUsers for a result written before units.
func UnitOf(unit string) string {
	if unit == "" {
		return UnitUsers
	}
	return unit
}

// Amount is n of unit as text: "400 users", "400/s".
func Amount(n float64, unit string) string {
	if UnitOf(unit) == UnitRate {
		return fmt.Sprintf("%.4g/s", n)
	}
	return fmt.Sprintf("%.4g users", n)
}

// UnitName is the step run's unit (UnitUsers for an older result).
func (s *Step) UnitName() string { return UnitOf(s.Unit) }

// UnitName is the ceiling's unit (UnitUsers for an older result).
func (c *Ceiling) UnitName() string { return UnitOf(c.Unit) }
