package pgtest

import "syscall"

// tmpfsMagic is the file system type statfs gives for tmpfs.
const tmpfsMagic = 0x01021994

// memoryRoom is the room a memory file system must have free for clusters
// to be made in it: a few clusters, each a few hundred megabytes once its
// tests have made their databases.
const memoryRoom = 2 << 30

// clustersDir is where a cluster's directory is made: /dev/shm when it is
// a memory file system with memoryRoom free, else the temporary directory
// (""). On a disk's file system, ext4 say, making the files of initdb
// and of every CREATE DATABASE was a third of the test server's CPU
// time; the cluster's data need not outlive it.
func clustersDir() string {
	var st syscall.Statfs_t
	if err := syscall.Statfs("/dev/shm", &st); err != nil || st.Type != tmpfsMagic || st.Bavail*uint64(st.Bsize) < memoryRoom {
		return ""
	}
	return "/dev/shm"
}
