package ownerindex

// validID accepts ids of 4 lowercase letters or digits, like "id07".
func validID(id string) bool {
	if len(id) != 4 {
		return false
	}
	for _, c := range id {
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9') {
			return false
		}
	}
	return true
}
