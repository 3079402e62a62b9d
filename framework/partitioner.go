package framework

// PartitionFor returns the partition Kafka's default partitioner (the Java
// client's, murmur2 of the key) picks for key among n partitions, so that
// records keyed here land where any Kafka client would put them. A nil key
// goes to partition 0; callers that want spreading pick a partition
// themselves.
func PartitionFor(key []byte, n int32) int32 {
	if n <= 1 || key == nil {
		return 0
	}
	return int32(murmur2(key)&0x7fffffff) % n
}

// murmur2 is the 32-bit MurmurHash2 variant Kafka uses (seed 0x9747b28c).
func murmur2(data []byte) uint32 {
	const (
		seed = 0x9747b28c
		m    = 0x5bd1e995
		r    = 24
	)
	length := len(data)
	h := uint32(seed) ^ uint32(length)
	for len(data) >= 4 {
		k := uint32(data[0]) | uint32(data[1])<<8 | uint32(data[2])<<16 | uint32(data[3])<<24
		k *= m
		k ^= k >> r
		k *= m
		h *= m
		h ^= k
		data = data[4:]
	}
	switch len(data) {
	case 3:
		h ^= uint32(data[2]) << 16
		fallthrough
	case 2:
		h ^= uint32(data[1]) << 8
		fallthrough
	case 1:
		h ^= uint32(data[0])
		h *= m
	}
	h ^= h >> 13
	h *= m
	h ^= h >> 15
	return h
}
