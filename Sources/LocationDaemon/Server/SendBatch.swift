import Glibc
import NIOCore
import Synchronization

/// Something whose lines a `SendBatch` sends: it takes back what its socket did not take.
protocol BatchedSender: AnyObject {
    /// Whether its socket is still open (a staged line is not sent on a number closed since).
    var socketOpen: Bool { get }
    /// What the socket did not take of a staged line, in order: written through the channel.
    func handOver(_ rest: ByteBuffer)
}

/// The direct sends of one input's fan-out (`Hub.handle`), made together once every delivery
/// of the input is decided, split between the hub's loop and a worker thread when there are
/// many (fork–join: the loop waits for the worker before it goes on). Each connection's lines
/// of the input are one job (one `sendmsg`), made by one thread, so its bytes keep their
/// order; what a socket does not take is handed back to its connection, on the loop, in the
/// order the jobs were staged. Nothing of a batch outlives it on another thread.
///
/// Why: at 1,000 subscribers the kernel's part of the sends (copy, queue, waking the reader)
/// was most of the loop's time per fix, on one core of two (docs/benchmarks.md, "Fan-out").
///
/// Used on the hub's loop only.
final class SendBatch {
    /// One connection's lines in this batch: `iovecs[first..<first + count]` once built.
    struct Job: Sendable {
        var descriptor: CInt
        var first = 0
        var count = 0
        var bytes = 0
        /// Bytes the socket took (-1: none, an error or EAGAIN).
        var sent = 0
    }

    /// Jobs at which the worker takes half: below it, waking a thread costs more than it saves.
    static let forkAt = 64

    /// Open batches (`open`/`close` nest: an input handled inside another's deliveries).
    private var depth = 0
    /// Staged lines, and for each the next line of the same job (-1: none).
    private var lines: [ByteBuffer] = []
    private var next: [Int] = []
    private var jobs: [Job] = []
    /// Per job: its first and last staged line, and whom to hand a rest back to.
    private var ends: [(first: Int, last: Int)] = []
    private var senders: [any BatchedSender] = []
    private var iovecs: [iovec] = []
    /// Counts commits: a writer's staged job belongs to this batch only within one generation.
    private(set) var generation: UInt64 = 0

    var isOpen: Bool { depth > 0 }

    func open() { depth += 1 }

    func close() {
        depth -= 1
        if depth == 0 { commit() }
    }

    /// Stages `line` for `descriptor`, after the job's earlier lines when `job` is one of this
    /// generation; returns the job's index.
    func stage(_ line: ByteBuffer, descriptor: CInt, job: Int?, sender: any BatchedSender) -> Int {
        let index = lines.count
        lines.append(line)
        next.append(-1)
        if let job {
            next[ends[job].last] = index
            ends[job].last = index
            return job
        }
        jobs.append(Job(descriptor: descriptor))
        ends.append((index, index))
        senders.append(sender)
        return jobs.count - 1
    }

    /// Sends what is staged, hands back what the sockets did not take, and starts the next
    /// generation (the batch stays open if it was).
    func commit() {
        generation &+= 1
        guard !jobs.isEmpty else { return }
        iovecs.removeAll(keepingCapacity: true)
        // The lines' storage stays put while `lines` holds them (nothing writes to it meanwhile),
        // so the pointers stay valid past the closure until the sends are made (as NIO's own
        // vector writes do).
        for j in jobs.indices {
            if !senders[j].socketOpen { jobs[j].descriptor = -1 }  // EBADF: handed back, dropped
            jobs[j].first = iovecs.count
            var line = ends[j].first
            while line >= 0 {
                lines[line].withUnsafeReadableBytes {
                    iovecs.append(iovec(iov_base: UnsafeMutableRawPointer(mutating: $0.baseAddress), iov_len: $0.count))
                }
                line = next[line]
            }
            jobs[j].count = iovecs.count - jobs[j].first
            jobs[j].bytes = iovecs[jobs[j].first...].reduce(0) { $0 + $1.iov_len }
        }
        iovecs.withUnsafeMutableBufferPointer { iov in
            jobs.withUnsafeMutableBufferPointer { all in
                let work = SendWork(jobs: all, iovecs: iov)
                if all.count >= Self.forkAt, SendWorker.shared?.fork(work.upper) == true {
                    work.lower.send()
                    SendWorker.shared?.join()
                } else {
                    work.all.send()
                }
            }
        }
        guard jobs.contains(where: { $0.sent != $0.bytes }) else {
            lines.removeAll(keepingCapacity: true)
            next.removeAll(keepingCapacity: true)
            jobs.removeAll(keepingCapacity: true)
            ends.removeAll(keepingCapacity: true)
            senders.removeAll(keepingCapacity: true)
            return
        }
        // Taken out first: a hand-back can close its connection, and the close handle an input
        // that uses the batch again.
        let staged = (lines: lines, next: next, jobs: jobs, ends: ends, senders: senders)
        (lines, next, jobs, ends, senders) = ([], [], [], [], [])
        for (j, job) in staged.jobs.enumerated() where job.sent != job.bytes {
            var skip = max(job.sent, 0)
            var line = staged.ends[j].first
            while line >= 0 {
                var rest = staged.lines[line]
                if skip >= rest.readableBytes {
                    skip -= rest.readableBytes
                } else {
                    rest.moveReaderIndex(forwardBy: skip)
                    skip = 0
                    staged.senders[j].handOver(rest)
                }
                line = staged.next[line]
            }
        }
    }
}

/// Jobs and their lines' vectors, handed to the worker for the time of one fork–join.
struct SendWork: @unchecked Sendable {
    let jobs: UnsafeMutableBufferPointer<SendBatch.Job>
    let iovecs: UnsafeMutableBufferPointer<iovec>

    var all: SendWork { self }
    var lower: SendWork { SendWork(jobs: UnsafeMutableBufferPointer(rebasing: jobs[..<(jobs.count / 2)]), iovecs: iovecs) }
    var upper: SendWork { SendWork(jobs: UnsafeMutableBufferPointer(rebasing: jobs[(jobs.count / 2)...]), iovecs: iovecs) }

    /// Never blocks; a peer gone raises no SIGPIPE (the send fails with EPIPE).
    static let flags = CInt(MSG_DONTWAIT) | CInt(MSG_NOSIGNAL)

    func send() {
        guard let base = iovecs.baseAddress else { return }
        for j in jobs.indices {
            var message = msghdr()
            message.msg_iov = base + jobs[j].first
            message.msg_iovlen = jobs[j].count
            jobs[j].sent = sendmsg(jobs[j].descriptor, &message, Self.flags)
        }
    }
}

/// The thread that makes half of a large batch's sends. One per process, started at the first
/// large batch (an idle daemon has none); a loop that finds it busy (another loop's batch: only
/// in tests, which run many hubs) makes all its sends itself. On a one-core machine there is none.
final class SendWorker: @unchecked Sendable {
    static let shared: SendWorker? = sysconf(CInt(_SC_NPROCESSORS_ONLN)) > 1 ? SendWorker() : nil

    /// Its stack: a loop of `sendmsg` calls needs little (the default would reserve 8 MiB).
    static let stackBytes = 64 * 1024

    private let start = UnsafeMutablePointer<sem_t>.allocate(capacity: 1)
    private let done = UnsafeMutablePointer<sem_t>.allocate(capacity: 1)
    /// Whether a loop holds the worker (from `fork` to `join`).
    private let taken = Atomic<Bool>(false)
    /// Written by the loop before `sem_post(start)`, read by the worker after its `sem_wait`.
    private var work: SendWork?

    private init?() {
        sem_init(start, 0, 0)
        sem_init(done, 0, 0)
        var attributes = pthread_attr_t()
        pthread_attr_init(&attributes)
        defer { pthread_attr_destroy(&attributes) }
        pthread_attr_setstacksize(&attributes, Self.stackBytes)
        pthread_attr_setdetachstate(&attributes, CInt(PTHREAD_CREATE_DETACHED))
        var thread = pthread_t()
        let rc = pthread_create(&thread, &attributes, { argument in
            Unmanaged<SendWorker>.fromOpaque(argument!).takeUnretainedValue().serve()
            return nil
        }, Unmanaged.passRetained(self).toOpaque())
        guard rc == 0 else { return nil }
    }

    /// Starts `work` on the worker; false when another loop holds it.
    func fork(_ work: SendWork) -> Bool {
        guard taken.compareExchange(expected: false, desired: true, ordering: .acquiring).exchanged else { return false }
        self.work = work
        sem_post(start)
        return true
    }

    /// Waits for the forked work to be done.
    func join() {
        while sem_wait(done) != 0 {}
        work = nil
        taken.store(false, ordering: .releasing)
    }

    private func serve() {
        while true {
            while sem_wait(start) != 0 {}
            work?.send()
            sem_post(done)
        }
    }
}
