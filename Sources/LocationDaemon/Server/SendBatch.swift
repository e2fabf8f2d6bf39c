import Glibc
import NIOCore
import Synchronization

/// Something whose lines a `SendBatch` sends: it takes back what its socket did not take.
protocol BatchedSender: AnyObject {
    /// What the socket did not take of a staged line, in order: queued in the channel.
    func handOver(_ rest: ByteBuffer)
    /// Writes what `handOver` queued.
    func flushHandOver()
}

/// The direct sends of one input's fan-out (`Hub.handle`), made together once every delivery
/// of the input is decided, split between the hub's loop and a worker thread when there are
/// many (fork–join: the loop waits for the worker before it goes on). Each connection's lines
/// of the input are one job (one `send`, or `sendmsg`), made by one thread, so its bytes keep their
/// order; what a socket does not take is handed back to its connection, on the loop, in the
/// order the jobs were staged. Nothing of a batch outlives it on another thread.
///
/// Why: at 1,000 subscribers the kernel's part of the sends (copy, queue, waking the reader)
/// was most of the loop's time per fix, on one core of two (docs/benchmarks.md, "Fan-out").
///
/// Used on the hub's loop only.
final class SendBatch {
    /// One connection's lines in this batch. Most have one line, whose vector is the job's own
    /// (`first`); the vectors of a job with more lines are in `vectors[at..<at + count]` once
    /// the batch sends. Nothing in it is reference-counted: staging and clearing a job cost no
    /// retain or release (≈ 100 instructions per subscriber and fix).
    struct Job {
        /// -1 once the socket closed: nothing is sent to the number or handed back.
        var descriptor: CInt
        var first: iovec
        /// Where the job's vectors start in the batch's `vectors` (-1: one line, `first`).
        var at = -1
        var count = 1
        var bytes: Int
        /// Bytes the socket took (-1: none, an error or EAGAIN).
        var sent = 0
        /// The first line in the batch's `lines`, and the job's second and last in `more`
        /// (-1: none).
        let line: Int
        var next = -1
        var last = -1
        /// Whom to hand a rest back to. Not retained: it is a channel handler whose writer
        /// detaches at its channel's close (`socketClosed`: nothing is handed back then), and
        /// NIO releases a closed channel's handlers in a later task of the loop, while a batch is
        /// opened and committed within one.
        unowned(unsafe) let sender: any BatchedSender
    }

    /// A connection's job in the batch of one generation.
    struct Staged: Equatable, Sendable {
        let job: Int
        let generation: UInt64
    }

    /// Jobs at which the worker takes half: below it, waking a thread costs more than it saves.
    static let forkAt = 64

    /// All of the batch's state in one value, changed by one call at a time. Not checked for
    /// exclusive access at run time (≈ 115 instructions per subscriber and fix): each access is
    /// one call into `Staging`, which calls nothing that could reach the batch (the sends and
    /// the worker's semaphores); what is handed back runs outside it (`commit`).
    @exclusivity(unchecked) private var staging = Staging()

    var isOpen: Bool { staging.depth > 0 }

    func open() { staging.depth += 1 }

    func close() {
        staging.depth -= 1
        if staging.depth == 0 { commit() }
    }

    /// Stages `line` for `descriptor`, after the connection's earlier lines when `previous` is
    /// of this generation; nil when the batch is not open.
    func stage(_ line: EncodedLine, descriptor: CInt, after previous: Staged?, sender: any BatchedSender) -> Staged? {
        staging.stage(line, descriptor: descriptor, after: previous, sender: sender)
    }

    /// Whether `staged` is in the batch, not yet sent.
    func holds(_ staged: Staged?) -> Bool { staged?.generation == staging.generation && !staging.jobs.isEmpty }

    /// `staged`'s socket is closed: its lines are not sent (its number may be another socket's
    /// by the time the batch is sent) nor handed back (its channel would drop them).
    func socketClosed(_ staged: Staged) {
        guard holds(staged) else { return }
        staging.jobs[staged.job].descriptor = -1
    }

    /// Sends what is staged, hands back what the sockets did not take, and starts the next
    /// generation (the batch stays open if it was).
    func commit() {
        // Handed back outside the access: a hand-back can close its connection, and the close
        // handle an input that uses the batch again.
        guard let unsent = staging.send() else { return }
        let rests = unsent.jobs.indices.filter { unsent.jobs[$0].descriptor >= 0 && unsent.jobs[$0].sent != unsent.jobs[$0].bytes }
        // Every rest is queued before any is flushed: a flush can fail and close its
        // connection, and the close run code that writes to a connection whose rest would
        // not be queued yet (its line split by another, or overtaken).
        defer {
            for j in rests { unsent.jobs[j].sender.flushHandOver() }
        }
        for j in rests {
            let job = unsent.jobs[j]
            var skip = max(job.sent, 0)
            var rest = unsent.lines[job.line]
            var next = job.next
            while true {
                if skip >= rest.readableBytes {
                    skip -= rest.readableBytes
                } else {
                    rest.moveReaderIndex(forwardBy: skip)
                    skip = 0
                    job.sender.handOver(rest)
                }
                guard next >= 0 else { break }
                rest = unsent.lines[unsent.more[next].line]
                next = unsent.more[next].next
            }
        }
    }

    /// A job's line after its first: its vector, the line in `lines`, the job's next (-1: none).
    private struct Line {
        let vector: iovec
        let line: Int
        var next = -1
    }

    private struct Staging {
        var depth = 0
        var generation: UInt64 = 0
        var jobs: [Job] = []
        /// The batch's distinct lines (nearly always one per event of the input: every
        /// subscriber's is the hub's shared line): held while their bytes are to be sent.
        var lines: [ByteBuffer] = []
        /// Where the last of `lines` starts and its length: a line at the same address with the
        /// same length is the same bytes (the storage is held, so the address is not reused).
        var lastLine: (base: UnsafeRawPointer?, count: Int) = (nil, -1)
        /// Lines after a job's first (a held-back event is written before the line).
        var more: [Line] = []
        var vectors: [iovec] = []

        mutating func stage(_ line: EncodedLine, descriptor: CInt, after previous: Staged?, sender: any BatchedSender) -> Staged? {
            guard depth > 0 else { return nil }
            let bytes = line.bytes
            if bytes.baseAddress != lastLine.base || bytes.count != lastLine.count {
                lines.append(line.buffer)
                lastLine = (bytes.baseAddress, bytes.count)
            }
            // The line's bytes stay put while `lines` holds it (nothing writes to it meanwhile),
            // so the vector stays valid until the sends are made (as NIO's own vector writes do).
            let vector = iovec(iov_base: UnsafeMutableRawPointer(mutating: bytes.baseAddress), iov_len: bytes.count)
            if let previous, previous.generation == generation {
                let j = previous.job
                more.append(Line(vector: vector, line: lines.count - 1))
                if jobs[j].last >= 0 { more[jobs[j].last].next = more.count - 1 } else { jobs[j].next = more.count - 1 }
                jobs[j].last = more.count - 1
                jobs[j].count += 1
                jobs[j].bytes += bytes.count
                return previous
            }
            jobs.append(Job(descriptor: descriptor, first: vector, bytes: bytes.count, line: lines.count - 1, sender: sender))
            return Staged(job: jobs.count - 1, generation: generation)
        }

        /// Sends every job and starts the next generation; returns the batch when a socket did
        /// not take all of its lines (this one is left empty).
        mutating func send() -> Staging? {
            generation &+= 1
            guard !jobs.isEmpty else { return nil }
            if !more.isEmpty { gatherVectors() }
            vectors.withUnsafeMutableBufferPointer { vectors in
                jobs.withUnsafeMutableBufferPointer { all in
                    let work = SendWork(jobs: all, vectors: vectors)
                    if all.count >= SendBatch.forkAt, let worker = SendWorker.shared, worker.fork(work.upper) {
                        work.lower.send()
                        worker.join()
                    } else {
                        work.send()
                    }
                }
            }
            let depth = depth, generation = generation
            defer {
                jobs.removeAll(keepingCapacity: true)
                lines.removeAll(keepingCapacity: true)
                lastLine = (nil, -1)
                more.removeAll(keepingCapacity: true)
            }
            guard jobs.contains(where: { $0.sent != $0.bytes }) else { return nil }
            var unsent = Staging(depth: depth, generation: generation)
            swap(&unsent, &self)
            return unsent
        }

        /// The vectors of the jobs with more than one line, each job's together.
        private mutating func gatherVectors() {
            vectors.removeAll(keepingCapacity: true)
            for j in jobs.indices where jobs[j].count > 1 {
                jobs[j].at = vectors.count
                vectors.append(jobs[j].first)
                var line = jobs[j].next
                while line >= 0 {
                    vectors.append(more[line].vector)
                    line = more[line].next
                }
            }
        }
    }
}

/// Jobs and their lines' vectors, handed to the worker for the time of one fork–join.
struct SendWork: @unchecked Sendable {
    let jobs: UnsafeMutableBufferPointer<SendBatch.Job>
    let vectors: UnsafeMutableBufferPointer<iovec>

    var lower: SendWork { SendWork(jobs: UnsafeMutableBufferPointer(rebasing: jobs[..<(jobs.count / 2)]), vectors: vectors) }
    var upper: SendWork { SendWork(jobs: UnsafeMutableBufferPointer(rebasing: jobs[(jobs.count / 2)...]), vectors: vectors) }

    /// Never blocks; a peer gone raises no SIGPIPE (the send fails with EPIPE).
    static let flags = CInt(MSG_DONTWAIT) | CInt(MSG_NOSIGNAL)

    /// One line is one `send`; more, one `sendmsg` with their vectors. A closed socket's job
    /// sends nothing.
    func send() {
        for j in jobs.indices where jobs[j].descriptor >= 0 {
            if jobs[j].at < 0 {
                jobs[j].sent = Glibc.send(jobs[j].descriptor, jobs[j].first.iov_base, jobs[j].first.iov_len, Self.flags)
            } else {
                var message = msghdr()
                message.msg_iov = vectors.baseAddress! + jobs[j].at
                message.msg_iovlen = jobs[j].count
                jobs[j].sent = sendmsg(jobs[j].descriptor, &message, Self.flags)
            }
        }
    }
}

/// The thread that makes half of a large batch's sends. One per process, started at the first
/// large batch (an idle daemon has none); a loop that finds it busy (another loop's batch: only
/// in tests, which run many hubs) makes all its sends itself. A process allowed one CPU (one
/// core, `CPUAffinity=`, a cpuset) has none: its two halves would only take turns.
final class SendWorker: @unchecked Sendable {
    static let shared: SendWorker? = usableCPUs() > 1 ? SendWorker() : nil

    /// The CPUs this thread may run on: its affinity mask (`Cpus_allowed`, hexadecimal), which
    /// a cpuset and `CPUAffinity=` narrow (Glibc does not export sched_getaffinity to Swift);
    /// the machine's count when it cannot be read.
    static func usableCPUs() -> Int {
        let fd = open("/proc/thread-self/status", O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return sysconf(CInt(_SC_NPROCESSORS_ONLN)) }
        defer { close(fd) }
        var bytes = [UInt8](repeating: 0, count: 4096)
        let n = bytes.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        guard n > 0 else { return sysconf(CInt(_SC_NPROCESSORS_ONLN)) }
        let status = String(decoding: bytes[..<n], as: UTF8.self)
        guard let line = status.split(separator: "\n").first(where: { $0.hasPrefix("Cpus_allowed:") }) else {
            return sysconf(CInt(_SC_NPROCESSORS_ONLN))
        }
        return line.dropFirst("Cpus_allowed:".count).reduce(0) { $0 + (Int(String($1), radix: 16) ?? 0).nonzeroBitCount }
    }

    /// Its stack: a loop of `send` calls needs little (the default would reserve 8 MiB).
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
