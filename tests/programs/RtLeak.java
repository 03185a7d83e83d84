import java.util.ArrayList;
import java.util.List;
import java.util.zip.Deflater;

// Leaks zlib streams through two named methods, handleRequest then
// makeCompressor: every request makes a Deflater (zlib's deflateInit2_
// mallocs its state, about 256 KiB); every 100th is kept and never ended,
// the others are ended (their memory freed). Prints what it keeps. With a
// second argument `wait`, prints `ready` and waits for a line on stdin
// before it starts, and for another before it exits (for attaching).
public class RtLeak {
    static final List<Deflater> kept = new ArrayList<>();

    static Deflater makeCompressor(int level) {
        Deflater deflater = new Deflater(level);
        deflater.setInput(new byte[] {1, 2, 3});
        return deflater;
    }

    static void handleRequest(int i) {
        Deflater deflater = makeCompressor(1 + i % 9);
        if (i % 100 == 0) {
            kept.add(deflater);
        } else {
            deflater.end();
        }
    }

    public static void main(String[] args) throws java.io.IOException {
        int requests = args.length > 0 ? Integer.parseInt(args[0]) : 20000;
        boolean wait = args.length > 1 && args[1].equals("wait");
        java.io.BufferedReader input =
            new java.io.BufferedReader(new java.io.InputStreamReader(System.in));
        if (wait) {
            System.out.println("ready");
            input.readLine();
        }
        for (int i = 0; i < requests; i++) {
            handleRequest(i);
        }
        System.out.println("kept " + kept.size() + " compressors");
        if (wait) {
            input.readLine();
        }
    }
}
