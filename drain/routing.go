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

// routingDetail is the routing state with what routing/ said about it.
func routingDetail(r Routing) string {
	s := string(r.State)
	if s == "" {
		s = "unknown"
	}
	if r.Detail != "" {
		s += " (" + r.Detail + ")"
	}
	return s
}
