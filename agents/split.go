package agents

// split shares n users among agents of the given weights (their cores),
// by highest averages (D'Hondt): each user goes, one after the other, to
// the agent with the highest weight / (users it has + 1), the lower index
// on a tie. So raising n never takes a user from an agent (users are not
// moved back and forth as a ceiling search steps up), and each agent has at
// least its whole share, floor(n·w/W). Weights must be positive.
func split(n int, weights []int) []int {
	out := make([]int, len(weights))
	total := 0
	for _, w := range weights {
		total += w
	}
	if n <= 0 || total <= 0 {
		return out
	}
	// Highest averages gives every agent at least its whole share: start
	// there, and hand out the rest (fewer than one per agent) one by one.
	left := n
	for i, w := range weights {
		out[i] = n * w / total
		left -= out[i]
	}
	for ; left > 0; left-- {
		best := 0
		for i := 1; i < len(weights); i++ {
			// weights[i]/(out[i]+1) > weights[best]/(out[best]+1), in integers
			if weights[i]*(out[best]+1) > weights[best]*(out[i]+1) {
				best = i
			}
		}
		out[best]++
	}
	return out
}

// pattern deals the open model's arrivals among agents of the given
// weights (their cores; 0 for an agent that takes none) as split shares
// users, by highest averages: each arrival of a cycle in turn goes to the
// agent with the highest weight / (arrivals it has + 1), the lower index
// on a tie, so that over the cycle agent i takes weights[i] / g of them
// (g the weights' greatest common divisor: the cycle is as short as it
// can be), spread through it. positions[i] are agent i's places in the
// cycle, ascending; the pattern repeats every cycle arrivals. No positive
// weight: a cycle of 1 that no agent takes.
func pattern(weights []int) (cycle int64, positions [][]int64) {
	positions = make([][]int64, len(weights))
	g := 0
	for _, w := range weights {
		if w > 0 {
			g = gcd(g, w)
		}
	}
	if g == 0 {
		return 1, positions
	}
	w := make([]int, len(weights))
	for i, x := range weights {
		w[i] = max(x, 0) / g
		cycle += int64(w[i])
	}
	for p := range cycle {
		best := -1
		for i := range w {
			// w[i]/(has[i]+1) > w[best]/(has[best]+1), in integers
			if w[i] > 0 && (best < 0 || w[i]*(len(positions[best])+1) > w[best]*(len(positions[i])+1)) {
				best = i
			}
		}
		positions[best] = append(positions[best], p)
	}
	return cycle, positions
}

func gcd(a, b int) int {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}
