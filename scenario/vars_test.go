package scenario

import (
	"context"
	"strings"
	"testing"
)

const varsSrc = `
MEMBERS = int(vars.get("members", "0"))
MODE = vars.get("mode", "read")
def a(user):
    pass
actions = [action("A" + str(MEMBERS) + MODE, a)]
`

func TestVarsReachTheScenario(t *testing.T) {
	ctx := context.Background()
	sc, err := Load(ctx, "v.star", []byte(varsSrc), Limits{Vars: map[string]string{"members": "200"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := sc.Actions[0].Name; got != "A200read" {
		t.Errorf("action name %q: want the var's value and the other's default, A200read", got)
	}
	plain, err := Load(ctx, "v.star", []byte(varsSrc), Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if plain.Actions[0].Name != "A0read" {
		t.Errorf("without --var: %q, want the defaults, A0read", plain.Actions[0].Name)
	}
	if plain.Hash == sc.Hash {
		t.Error("the same file with another --var has the same hash: it is another scenario")
	}
	again, _ := Load(ctx, "v.star", []byte(varsSrc), Limits{Vars: map[string]string{"members": "200"}})
	if again.Hash != sc.Hash {
		t.Error("the same file and vars hash differently")
	}
}

func TestVarsAreReadOnly(t *testing.T) {
	src := "vars[\"members\"] = \"1\"\n" + varsSrc
	_, err := Load(context.Background(), "v.star", []byte(src), Limits{Vars: map[string]string{"members": "2"}})
	if err == nil || !strings.Contains(err.Error(), "frozen") {
		t.Fatalf("writing to vars: %v, want a frozen-dict error", err)
	}
}

func TestUnreadVarRefused(t *testing.T) {
	_, err := Load(context.Background(), "v.star", []byte(varsSrc), Limits{Vars: map[string]string{"membres": "200"}})
	if err == nil {
		t.Fatal("a --var the scenario never reads was accepted")
	}
	for _, want := range []string{"--var membres", `never reads a var named "membres"`, "did you mean --var members"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	_, err = Load(context.Background(), "v.star", []byte("def a(user):\n    pass\nactions = [action(\"A\", a)]\n"), Limits{Vars: map[string]string{"x": "1"}})
	if err == nil || !strings.Contains(err.Error(), "it reads no vars") {
		t.Errorf("a scenario with no vars: %v", err)
	}
}

func TestCheckVarName(t *testing.T) {
	for name, ok := range map[string]bool{"members": true, "_x1": true, "MAX_USERS": true, "1x": false, "a-b": false, "": false, "a b": false} {
		if err := CheckVarName(name); (err == nil) != ok {
			t.Errorf("CheckVarName(%q) = %v, want ok=%v", name, err, ok)
		}
	}
}
