// Command etcd is a one-member etcd for the end-to-end check's kube-apiserver:
// go.etcd.io/etcd/server/v3/embed v3.5.21, the server Kubernetes 1.33 is
// built against, listening for clients on one loopback URL and for peers on
// another, keeping its data in a directory the caller removes. It runs until
// SIGINT or SIGTERM.
//
//	etcd -data-dir DIR -client-url http://127.0.0.1:PORT -peer-url http://127.0.0.1:PORT
package main

import (
	"flag"
	"fmt"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "etcd:", err)
		os.Exit(1)
	}
}

func run() error {
	dataDir := flag.String("data-dir", "", "where etcd keeps its data (required)")
	clientURL := flag.String("client-url", "http://127.0.0.1:2379", "the URL clients dial (loopback only)")
	peerURL := flag.String("peer-url", "http://127.0.0.1:2380", "the peer URL of this one member (loopback only)")
	readyTimeout := flag.Duration("ready-timeout", 60*time.Second, "how long to wait for the server to be ready")
	flag.Parse()
	if *dataDir == "" {
		return fmt.Errorf("-data-dir is required")
	}
	cu, err := loopbackURL(*clientURL)
	if err != nil {
		return fmt.Errorf("-client-url: %w", err)
	}
	pu, err := loopbackURL(*peerURL)
	if err != nil {
		return fmt.Errorf("-peer-url: %w", err)
	}

	cfg := embed.NewConfig()
	cfg.Name = "e2e"
	cfg.Dir = *dataDir
	cfg.ListenClientUrls = []url.URL{*cu}
	cfg.AdvertiseClientUrls = []url.URL{*cu}
	cfg.ListenPeerUrls = []url.URL{*pu}
	cfg.AdvertisePeerUrls = []url.URL{*pu}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	cfg.LogLevel = "warn"
	cfg.UnsafeNoFsync = true // a throwaway store: nothing here needs to survive a crash

	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return fmt.Errorf("start: %w", err)
	}
	defer e.Close()
	select {
	case <-e.Server.ReadyNotify():
		fmt.Printf("etcd: ready on %s\n", cu)
	case <-time.After(*readyTimeout):
		e.Server.Stop()
		return fmt.Errorf("not ready within %s", *readyTimeout)
	}

	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	select {
	case s := <-sig:
		fmt.Printf("etcd: %s, stopping\n", s)
		return nil
	case err := <-e.Err():
		return fmt.Errorf("server: %w", err)
	}
}

// loopbackURL parses s and refuses any host but 127.0.0.0/8: the check keeps
// every process on this machine.
func loopbackURL(s string) (*url.URL, error) {
	u, err := url.Parse(s)
	if err != nil {
		return nil, err
	}
	if u.Scheme != "http" || !strings.HasPrefix(u.Hostname(), "127.") || u.Port() == "" {
		return nil, fmt.Errorf("%q: want http://127.x.y.z:PORT", s)
	}
	return u, nil
}
