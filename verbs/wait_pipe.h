/* verbs/wait_pipe: the descriptor behind a completion channel and a
 * context's async_fd.  A pipe that holds a byte while its owner's queue
 * of events is non-empty, so the application's poll/epoll/O_NONBLOCK on
 * the read end work as on rdma-core's kernel descriptors, and a wait in
 * it behaves as rdma-core's read() there: a signal handler installed
 * without SA_RESTART ends it with EINTR (qperf's test timer relies on
 * that), one with SA_RESTART does not, which poll() could not tell apart.
 *
 * The owner keeps the byte in step with its queue under its own lock:
 * srn_wait_pipe_set when the queue becomes non-empty, srn_wait_pipe_drain
 * when it becomes empty, and srn_wait_pipe_set again after a wait that
 * took the byte if entries remain. */
#ifndef VERBS_WAIT_PIPE_H
#define VERBS_WAIT_PIPE_H

struct srn_wait_pipe {
	int rfd;                     /* the read end: the application's fd */
	int wfd;                     /* the write end (non-blocking) */
	int rfd_nb;                  /* the read end opened again through
	                              * /proc, non-blocking whatever the
	                              * application does to rfd; -1 without
	                              * /proc */
};

/* 0, or -1 with errno. */
int srn_wait_pipe_open(struct srn_wait_pipe *p);
void srn_wait_pipe_close(struct srn_wait_pipe *p);
/* One byte in (a full pipe is readable anyway). */
void srn_wait_pipe_set(struct srn_wait_pipe *p);
/* Every byte out, without ever sleeping. */
void srn_wait_pipe_drain(struct srn_wait_pipe *p);
/* Sleeps until the pipe is readable.  1: it took a byte (the owner puts
 * it back if its queue is still non-empty), 0: woke without taking one,
 * -1 with errno: EINTR (a handler without SA_RESTART; without /proc, any
 * handler), EAGAIN when the application made rfd non-blocking. */
int srn_wait_pipe_wait(struct srn_wait_pipe *p);

#endif
