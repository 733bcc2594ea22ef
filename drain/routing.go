package drain

// routingMet reports whether the routing condition lets the drain end on
// quiet. Pending blocks; a state this package does not know blocks too, so a
// new state never ends a drain early by mistake.
func routingMet(r Routing) bool {
	switch r.State {
	case RoutingOff, RoutingWithdrawn, RoutingUnverified:
		return true
	}
	return false
}

// routingReason is the reason a drain that ended on its conditions reports.
func routingReason(r Routing) Reason {
	switch r.State {
	case RoutingWithdrawn:
		if r.APIOnly {
			return ReasonWithdrawnInAPI
		}
		if r.Balancer {
			return ReasonLBMarkedDown
		}
		return ReasonRoutedAway
	case RoutingUnverified:
		return ReasonUnverified
	}
	return ReasonQuiet
}

// Detail is what routing/ observed and, when the pod's own check is
// combined, where that check stands: the one place the routing detail is
// written, called where it is shown (status, the log, the drain's result).
func (r Routing) Detail() string {
	var d string
	if r.Why != nil {
		d = r.Why.Text()
	}
	if c := r.PodCheck; c != nil {
		if c.MarkedDown() {
			d += "; marked down: " + c.String()
		} else {
			d += "; " + c.String()
		}
	}
	return d
}

// Stated is the routing state with its detail.
func (r Routing) Stated() string {
	s := string(r.State)
	if s == "" {
		s = "unknown"
	}
	if d := r.Detail(); d != "" {
		s += " (" + d + ")"
	}
	return s
}
