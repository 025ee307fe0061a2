// A loopback TCP proxy the tests cut, to break a live gRPC stream for real (as tests/e2e/tcp_proxy.py).
// cut(): closes the client side of every open connection; the server side stays open and unread until
// close(), so the server sees no disconnect. Acting on the HTTP/2 frames the server sends back (9-byte
// header: length, type, flags, stream), so a break lands at the same point however fast either side
// runs: cutAfterData(n) cuts the next connection once n DATA frames went through; hold() makes new
// connections pass the server's set-up back but nothing from the first response HEADERS frame on
// (the server gets the call, the client hears nothing of it).
import net from "node:net";

export async function startProxy(upstreamPort) {
  const clients = new Set();
  const all = new Set();
  let holding = false;
  let cutAfter;
  let accepted = 0;
  const server = net.createServer((client) => {
    accepted += 1;
    const upstream = net.connect(upstreamPort, "127.0.0.1");
    clients.add(client);
    all.add(client).add(upstream);
    client.on("error", () => {});
    upstream.on("error", () => {});
    client.on("data", (d) => upstream.write(d));
    client.on("close", () => clients.delete(client)); // never passed on to the server
    const limit = cutAfter;
    cutAfter = undefined;
    if (!holding && limit === undefined) {
      upstream.on("data", (d) => client.destroyed || client.write(d));
      return;
    }
    let buffer = Buffer.alloc(0);
    let dataFrames = 0;
    const stop = () => {
      upstream.off("data", forwardFrames); // stop reading: the server side stays open, unread
      upstream.pause();
    };
    const forwardFrames = (d) => {
      buffer = Buffer.concat([buffer, d]);
      while (buffer.length >= 9 && buffer.length >= 9 + buffer.readUIntBE(0, 3)) {
        const end = 9 + buffer.readUIntBE(0, 3);
        if (limit === undefined && buffer[3] === 1) return stop(); // a HEADERS frame: hold
        client.write(buffer.subarray(0, end));
        if (buffer[3] === 0 && end > 9) dataFrames += 1;
        buffer = buffer.subarray(end);
        if (dataFrames === limit) {
          stop();
          clients.delete(client);
          client.end(() => client.destroy()); // what went through reaches the client first
          return;
        }
      }
    };
    upstream.on("data", forwardFrames);
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    port: server.address().port,
    get accepted() {
      return accepted;
    },
    hold(on = true) {
      holding = on;
    },
    cutAfterData(frames) {
      cutAfter = frames;
    },
    cut() {
      const n = clients.size;
      for (const c of clients) c.destroy();
      clients.clear();
      return n;
    },
    async close() {
      for (const s of all) s.destroy();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}
