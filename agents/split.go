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
