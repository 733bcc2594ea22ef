package supervisor

import "github.com/hapsuper/hapsuper/conf"

// shimEnv is env (the companion's) with what the commands hapsuper is
// installed as for the controllers (gopherd, s6-svc: cmd/hapsuper) need to
// find this hapsuper: its status socket, however --status-socket was
// given (a flag is not in the environment otherwise, and they would ask
// the default path). It replaces a value env carries already.
func shimEnv(env []string, s conf.Settings) []string {
	return append(withoutEnv(env, conf.StatusSocketEnv), conf.StatusSocketEnv+"="+s.StatusSocket)
}
