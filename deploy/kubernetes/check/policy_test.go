package check

import (
	"net"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// endpoint is one end of a connection as a NetworkPolicy sees it: a pod
// (its namespace and labels) or an address outside the cluster (ip only).
type endpoint struct {
	ns     string
	labels map[string]string // nil: not a pod
	ip     string
}

// allows says whether pols let from open a connection to to's port, as a
// network plugin that enforces NetworkPolicy decides: from's egress and
// to's ingress must both allow it (answers on an allowed connection need
// no rule). Named ports are not matched: the manifests give numbers.
func allows(pols []*networkingv1.NetworkPolicy, from, to endpoint, port int32, proto corev1.Protocol) bool {
	return allowsSide(pols, from, to, port, proto, networkingv1.PolicyTypeEgress) &&
		allowsSide(pols, to, from, port, proto, networkingv1.PolicyTypeIngress)
}

// allowsSide: pod is isolated in direction dir by every policy of its
// namespace that selects it and names dir; isolated, it is allowed what
// one of their rules allows; not isolated, anything.
func allowsSide(pols []*networkingv1.NetworkPolicy, pod, peer endpoint, port int32, proto corev1.Protocol, dir networkingv1.PolicyType) bool {
	if pod.labels == nil {
		return true // an address outside the cluster: none of these policies is its
	}
	isolated := false
	for _, p := range pols {
		if p.Namespace != pod.ns || !slices.Contains(p.Spec.PolicyTypes, dir) || !selects(&p.Spec.PodSelector, pod.labels) {
			continue
		}
		isolated = true
		if dir == networkingv1.PolicyTypeIngress {
			for _, r := range p.Spec.Ingress {
				if portMatches(r.Ports, port, proto) && peerMatches(r.From, p.Namespace, peer) {
					return true
				}
			}
		} else {
			for _, r := range p.Spec.Egress {
				if portMatches(r.Ports, port, proto) && peerMatches(r.To, p.Namespace, peer) {
					return true
				}
			}
		}
	}
	return !isolated
}

func selects(sel *metav1.LabelSelector, l map[string]string) bool {
	s, err := metav1.LabelSelectorAsSelector(sel)
	return err == nil && s.Matches(labels.Set(l))
}

func portMatches(ports []networkingv1.NetworkPolicyPort, port int32, proto corev1.Protocol) bool {
	if len(ports) == 0 {
		return true
	}
	for _, p := range ports {
		pr := corev1.ProtocolTCP
		if p.Protocol != nil {
			pr = *p.Protocol
		}
		if pr != proto {
			continue
		}
		if p.Port == nil {
			return true
		}
		if p.Port.IntVal == port || p.EndPort != nil && p.Port.IntVal <= port && port <= *p.EndPort {
			return true
		}
	}
	return false
}

// peerMatches: a podSelector alone means the policy's namespace; a
// namespaceSelector and a podSelector in one peer, both (AND).
func peerMatches(peers []networkingv1.NetworkPolicyPeer, policyNS string, e endpoint) bool {
	if len(peers) == 0 {
		return true
	}
	for _, p := range peers {
		if p.IPBlock != nil {
			if e.ip != "" && inBlock(p.IPBlock, e.ip) {
				return true
			}
			continue
		}
		if e.labels == nil {
			continue
		}
		nsOK := e.ns == policyNS
		if p.NamespaceSelector != nil {
			nsOK = selects(p.NamespaceSelector, map[string]string{"kubernetes.io/metadata.name": e.ns})
		}
		if nsOK && (p.PodSelector == nil || selects(p.PodSelector, e.labels)) {
			return true
		}
	}
	return false
}

func inBlock(b *networkingv1.IPBlock, ip string) bool {
	a, err := netip.ParseAddr(ip)
	if err != nil {
		return false
	}
	in := func(cidr string) bool {
		p, err := netip.ParsePrefix(cidr)
		return err == nil && p.Contains(a)
	}
	if !in(b.CIDR) {
		return false
	}
	return !slices.ContainsFunc(b.Except, in)
}

func emptySelector(s *metav1.LabelSelector) bool {
	return s == nil || len(s.MatchLabels) == 0 && len(s.MatchExpressions) == 0
}

// policy returns the Set's NetworkPolicy of that name.
func policy(t *testing.T, s *Set, name string) *networkingv1.NetworkPolicy {
	t.Helper()
	for _, p := range s.Policies {
		if p.Name == name {
			return p
		}
	}
	t.Fatalf("no NetworkPolicy %s", name)
	return nil
}

// Every peer is scoped: a namespaceSelector is never empty (`{}` is every
// namespace) and comes with a podSelector in the same element (AND: the
// YAML of two elements, `- namespaceSelector` and `- podSelector`, is an OR
// that lets a whole namespace in); no rule is open to every peer or every
// port; no address block is the whole internet.
func TestNetworkPolicyPeersAreScoped(t *testing.T) {
	s := build(t)
	for _, p := range s.Policies {
		type rule struct {
			dir   string
			peers []networkingv1.NetworkPolicyPeer
			ports []networkingv1.NetworkPolicyPort
		}
		var rules []rule
		for _, r := range p.Spec.Ingress {
			rules = append(rules, rule{"from", r.From, r.Ports})
		}
		for _, r := range p.Spec.Egress {
			rules = append(rules, rule{"to", r.To, r.Ports})
		}
		for i, r := range rules {
			if len(r.peers) == 0 || len(r.ports) == 0 {
				t.Errorf("NetworkPolicy %s rule %d: %d `%s` peers, %d ports: a rule without either lets in everything there", p.Name, i, len(r.peers), r.dir, len(r.ports))
			}
			for j, peer := range r.peers {
				switch {
				case peer.NamespaceSelector != nil && emptySelector(peer.NamespaceSelector):
					t.Errorf("NetworkPolicy %s rule %d `%s`[%d]: namespaceSelector {} is every namespace: name one (kubernetes.io/metadata.name)", p.Name, i, r.dir, j)
				case peer.NamespaceSelector != nil && emptySelector(peer.PodSelector):
					t.Errorf("NetworkPolicy %s rule %d `%s`[%d]: a namespaceSelector without a podSelector in the same element lets in every pod of %v", p.Name, i, r.dir, j, peer.NamespaceSelector.MatchLabels)
				case peer.PodSelector != nil && peer.NamespaceSelector == nil && emptySelector(peer.PodSelector):
					t.Errorf("NetworkPolicy %s rule %d `%s`[%d]: podSelector {} is every pod of the namespace", p.Name, i, r.dir, j)
				case peer.IPBlock != nil:
					if pre, err := netip.ParsePrefix(peer.IPBlock.CIDR); err != nil || pre.Bits() == 0 {
						t.Errorf("NetworkPolicy %s rule %d `%s`[%d]: ipBlock %q: want the target's address or range, not everything", p.Name, i, r.dir, j, peer.IPBlock.CIDR)
					}
				}
			}
		}
	}
}

// The namespace's pods are shut in both ways unless a policy says
// otherwise, and the coordinator's and the agents' egress is policed (by a
// policy of their own besides the default deny).
func TestEgressIsPoliced(t *testing.T) {
	s := build(t)
	deny := policy(t, s, PolicyNames[0]).Spec
	if !emptySelector(&deny.PodSelector) || len(deny.Ingress)+len(deny.Egress) != 0 ||
		!slices.Contains(deny.PolicyTypes, networkingv1.PolicyTypeIngress) || !slices.Contains(deny.PolicyTypes, networkingv1.PolicyTypeEgress) {
		t.Errorf("NetworkPolicy %s: %+v, want every pod (podSelector {}), Ingress and Egress, no rules", PolicyNames[0], deny)
	}
	for _, c := range []struct {
		name   string
		labels map[string]string
	}{{PolicyNames[1], s.Coordinator.Spec.Template.Labels}, {PolicyNames[2], s.Agents.Spec.Template.Labels}} {
		p := policy(t, s, c.name).Spec
		if !selects(&p.PodSelector, c.labels) || !slices.Contains(p.PolicyTypes, networkingv1.PolicyTypeEgress) || len(p.Egress) == 0 {
			t.Errorf("NetworkPolicy %s: does not select %v for Egress with rules of its own", c.name, c.labels)
		}
	}
}

// targetEndpoint is the pod (or address) the coordinator's --target names,
// as the agents' policy must admit it, and its port. A Service's name,
// NAME.NS.svc[.cluster.local], must be admitted by a peer naming NS with a
// podSelector, whose labels stand for the target's pods here; an address,
// by an ipBlock holding it.
func targetEndpoint(t *testing.T, s *Set, agents *networkingv1.NetworkPolicy) (endpoint, int32) {
	t.Helper()
	raw, _ := Flag(s.Coordinator.Spec.Template.Spec.Containers[0].Args, "target")
	u, err := url.Parse(raw)
	if err != nil || u.Hostname() == "" {
		t.Fatalf("coordinator --target=%q: %v", raw, err)
	}
	port := map[string]string{"http": "80", "https": "443", "ws": "80", "wss": "443"}[u.Scheme]
	if u.Port() != "" {
		port = u.Port()
	}
	n, err := strconv.Atoi(port)
	if err != nil {
		t.Fatalf("coordinator --target=%q: no port", raw)
	}
	host := u.Hostname()
	if net.ParseIP(host) != nil {
		return endpoint{ip: host}, int32(n)
	}
	parts := strings.Split(host, ".")
	if len(parts) < 3 || parts[2] != "svc" {
		t.Fatalf("coordinator --target=%q: a Service's name (NAME.NAMESPACE.svc[.cluster.local]) or an IP address, so that this test can tell what the agents' policy must admit", raw)
	}
	for _, r := range agents.Spec.Egress {
		for _, peer := range r.To {
			if peer.NamespaceSelector != nil && peer.NamespaceSelector.MatchLabels["kubernetes.io/metadata.name"] == parts[1] && peer.PodSelector != nil {
				return endpoint{ns: parts[1], labels: peer.PodSelector.MatchLabels}, int32(n)
			}
		}
	}
	t.Fatalf("NetworkPolicy %s: no egress peer names --target's namespace %q (kubernetes.io/metadata.name) with a podSelector: set the target rule to --target=%s", agents.Name, parts[1], raw)
	return endpoint{}, 0
}

// Who may reach whom, decided over every policy as an enforcing network
// plugin would: agents reach the coordinator, DNS and --target; the
// coordinator DNS; Prometheus of one named namespace the agents' metrics;
// nothing else, either way.
func TestNetworkPoliciesAllowWhatTheRunNeedsOnly(t *testing.T) {
	s := build(t)
	reader, err := Reader(dir)
	if err != nil {
		t.Fatal(err)
	}
	ns := s.Namespace.Name
	agentPolicy := policy(t, s, PolicyNames[2])
	agent := endpoint{ns: ns, labels: s.Agents.Spec.Template.Labels}
	coord := endpoint{ns: ns, labels: s.Coordinator.Spec.Template.Labels}
	readerPod := endpoint{ns: ns, labels: reader.Labels}
	coordPort := s.Service.Spec.Ports[0].Port
	metricsListen, _ := Flag(s.Agents.Spec.Template.Spec.Containers[0].Args, "metrics-listen")
	_, mp, _ := net.SplitHostPort(metricsListen)
	metricsPort64, _ := strconv.ParseInt(mp, 10, 32)
	metricsPort := int32(metricsPort64)

	// Prometheus's namespace, as the agents' policy names it.
	promNS := ""
	for _, r := range agentPolicy.Spec.Ingress {
		if portMatches(r.Ports, metricsPort, corev1.ProtocolTCP) {
			for _, peer := range r.From {
				if peer.NamespaceSelector != nil {
					promNS = peer.NamespaceSelector.MatchLabels["kubernetes.io/metadata.name"]
				}
			}
		}
	}
	if promNS == "" {
		t.Fatalf("NetworkPolicy %s: no ingress on the metrics port %d from a namespace named by kubernetes.io/metadata.name", agentPolicy.Name, metricsPort)
	}
	prom := endpoint{ns: promNS, labels: map[string]string{"app.kubernetes.io/name": "prometheus"}}
	dns := endpoint{ns: "kube-system", labels: map[string]string{"k8s-app": "kube-dns"}}
	target, targetPort := targetEndpoint(t, s, agentPolicy)
	elsewhere := func(e endpoint, ns string) endpoint { e.ns = ns; return e }
	tcp, udp := corev1.ProtocolTCP, corev1.ProtocolUDP
	for _, c := range []struct {
		what     string
		from, to endpoint
		port     int32
		proto    corev1.Protocol
		want     bool
	}{
		{"agents -> the coordinator", agent, coord, coordPort, tcp, true},
		{"agents -> DNS (UDP)", agent, dns, 53, udp, true},
		{"agents -> DNS (TCP)", agent, dns, 53, tcp, true},
		{"agents -> --target", agent, target, targetPort, tcp, true},
		{"coordinator -> DNS (UDP)", coord, dns, 53, udp, true},
		{"coordinator -> DNS (TCP)", coord, dns, 53, tcp, true},
		{"Prometheus of " + promNS + " -> agents' metrics", prom, agent, metricsPort, tcp, true},

		{"Prometheus of another namespace -> agents' metrics", elsewhere(prom, "team-x"), agent, metricsPort, tcp, false},
		{"another pod of " + promNS + " -> agents' metrics", endpoint{ns: promNS, labels: map[string]string{"app": "grafana"}}, agent, metricsPort, tcp, false},
		{"Prometheus -> the coordinator", prom, coord, coordPort, tcp, false},
		{"a pod labelled as an agent, in another namespace -> the coordinator", elsewhere(agent, "team-x"), coord, coordPort, tcp, false},
		{"another pod of the namespace -> the coordinator", endpoint{ns: ns, labels: map[string]string{"app": "other"}}, coord, coordPort, tcp, false},
		{"agents -> the target's pods in another namespace", agent, elsewhere(target, "team-x"), targetPort, tcp, false},
		{"agents -> another port of the target", agent, target, targetPort + 1, tcp, false},
		{"agents -> the internet", agent, endpoint{ip: "203.0.113.7"}, 443, tcp, false},
		{"agents -> the API server", agent, endpoint{ip: "10.96.0.1"}, 443, tcp, false},
		{"agents -> other agents' metrics", agent, agent, metricsPort, tcp, false},
		{"agents -> kube-system on another port", agent, dns, 9153, tcp, false},
		{"coordinator -> --target", coord, target, targetPort, tcp, false},
		{"coordinator -> the internet", coord, endpoint{ip: "203.0.113.7"}, 443, tcp, false},
		{"coordinator -> agents' metrics", coord, agent, metricsPort, tcp, false},
		{"the results reader -> DNS", readerPod, dns, 53, udp, false},
		{"anything -> the results reader", prom, readerPod, 80, tcp, false},
	} {
		if got := allows(s.Policies, c.from, c.to, c.port, c.proto); got != c.want {
			t.Errorf("%s (port %d/%s): allowed %v, want %v", c.what, c.port, c.proto, got, c.want)
		}
	}
}
