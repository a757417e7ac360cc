package engine

import (
	"context"
	"fmt"

	"github.com/headroom-dev/headroom/scenario"
	"github.com/headroom-dev/headroom/scenario/ws"
	"github.com/headroom-dev/headroom/transport"
	"go.starlark.net/starlark"
)

// Init runs the scenario's init(user), if it has one, once: call it
// before the first SetUsers. Its user has id 0 and a connection of its
// own to the target; its requests are recorded as a user's. Every user
// added later reads what it returned as user.shared. Cancelling ctx
// cancels init (its request in flight, a sleep). The error is a
// *scenario.InitError when init failed, or a *PanicError.
func (e *Engine) Init(ctx context.Context) (err error) {
	if e.cfg.Scenario.Init == nil {
		return nil
	}
	client := e.newClient(e.clientOptions(0))
	defer client.Close()
	u := scenario.NewUser(e.cfg.Scenario, scenario.Env{
		ID: 0, Seed: e.cfg.Seed, HTTP: withCredentials(client, e.cfg.Target), Record: e.cfg.Recorder.Shard(0), Print: e.cfg.Print,
		WS: ws.Dialing{Target: e.cfg.Target, Timeout: e.cfg.Timeout, TLS: e.cfg.Settings.TLS(), MaxMessage: e.cfg.MaxBody, Dial: e.cfg.Dial},
	})
	defer u.Close()
	stop := context.AfterFunc(ctx, func() {
		u.Cancel(fmt.Sprint(context.Cause(ctx)))
		client.Cancel()
	})
	defer stop()
	defer func() {
		if p := recover(); p != nil {
			err = &PanicError{Where: "init", Value: p}
		}
	}()
	v, err := u.Init()
	if err != nil {
		return err
	}
	e.mu.Lock()
	e.shared = v
	e.mu.Unlock()
	return nil
}

// Shared returns what init returned (None after an init that returned
// nothing), or nil before Init or without an init.
func (e *Engine) Shared() starlark.Value {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.shared
}

// SetShared sets what users read as user.shared, as init would: an agent
// runs no init of its own, and takes what its coordinator's returned.
// Call it before the first SetUsers; v must be frozen.
func (e *Engine) SetShared(v starlark.Value) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.shared = v
}

// newClient makes an HTTP client of the given options: Config.HTTP's, or
// a transport.Client.
func (e *Engine) newClient(opt transport.Options) scenario.HTTPClient {
	if e.cfg.HTTP != nil {
		return e.cfg.HTTP(opt)
	}
	return transport.NewClient(opt)
}

// clientOptions are the transport options of user id's connection (id 0
// is init's user).
func (e *Engine) clientOptions(id int) transport.Options {
	opt := transport.Options{Target: e.cfg.Target, Timeout: e.cfg.Timeout, Settings: e.cfg.Settings, MaxBodySize: e.cfg.MaxBody, Pool: e.conns, Dial: e.cfg.Dial}
	if n := len(e.cfg.SourceAddrs); n > 0 {
		opt.LocalAddr = e.cfg.SourceAddrs[max(id-1, 0)%n]
	}
	return opt
}
