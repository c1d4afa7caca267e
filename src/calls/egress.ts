/**
 * Where the `http` node may connect (DESIGN §13.1). Checked on the addresses DNS gives, in the
 * socket's own lookup, so the address checked is the address connected to (no DNS rebinding
 * between the two), for every request and every redirect hop.
 *
 * - Never: link-local addresses (169.254.0.0/16, fe80::/10: cloud metadata services) and the
 *   engine's own API (the address and port its HTTP server listens on).
 * - `deny`: host names (`"*.internal.example"`), CIDRs (`"10.0.0.0/8"`), `"private"`,
 *   `"loopback"`, or `"*"` (everything); `skein serve` with tokens adds `private` and `loopback`.
 * - `allow` lifts a deny for what it matches (the same kinds of entries): `deny: ["*"],
 *   allow: ["api.example.com"]` is an allowlist.
 */
import { lookup as dnsLookup, type LookupAddress } from "node:dns";
import { BlockList, isIP, type LookupFunction } from "node:net";
import { networkInterfaces } from "node:os";
import { NonRetryableError } from "../errors.js";

/** The engine option `egress`. */
export interface EgressOptions {
  /** Destinations a deny does not apply to: host names or `*.` patterns, CIDRs, `private`, `loopback`. */
  allow?: string[];
  /** Destinations refused: host names or `*.` patterns, CIDRs, `private`, `loopback`, `*`. */
  deny?: string[];
}

/** A connection the rules refuse: the visit fails, not retried. */
export class EgressError extends NonRetryableError {}

const LINK_LOCAL = blockList(["169.254.0.0/16", "fe80::/10"]);
const LOOPBACK = blockList(["127.0.0.0/8", "::1/128", "0.0.0.0/32", "::/128"]);
const PRIVATE = blockList(["10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10", "fc00::/7"]);

function blockList(cidrs: string[]): BlockList {
  const list = new BlockList();
  for (const cidr of cidrs) {
    const [net, bits] = cidr.split("/") as [string, string];
    list.addSubnet(net, Number(bits), isIP(net) === 6 ? "ipv6" : "ipv4");
  }
  return list;
}

/** The problems of an `egress` option, with their paths. */
export function egressProblems(options: unknown): { path: string; message: string }[] {
  if (options === undefined) return [];
  if (options === null || typeof options !== "object" || Array.isArray(options))
    return [{ path: "egress", message: "must be an object { allow?, deny? }" }];
  const problems: { path: string; message: string }[] = [];
  for (const [key, list] of Object.entries(options)) {
    if (key !== "allow" && key !== "deny") {
      problems.push({ path: `egress.${key}`, message: "is not an egress field: use allow or deny" });
      continue;
    }
    if (!Array.isArray(list)) {
      problems.push({ path: `egress.${key}`, message: "must be a list of host names, CIDRs, private, loopback" });
      continue;
    }
    list.forEach((entry, i) => {
      if (typeof entry !== "string" || entry.trim() === "" || (entry.includes("/") && !parseCidr(entry))) {
        problems.push({
          path: `egress.${key}[${i}]`,
          message: `${JSON.stringify(entry)} is not a host name, "*.example.com", a CIDR ("10.0.0.0/8"), private, loopback${key === "deny" ? " or *" : ""}`,
        });
      }
    });
  }
  return problems;
}

function parseCidr(entry: string): { net: string; bits: number; type: "ipv4" | "ipv6" } | null {
  const [net, bits, extra] = entry.split("/");
  if (net === undefined || bits === undefined || extra !== undefined || !/^\d+$/.test(bits)) return null;
  const version = isIP(net);
  const max = version === 4 ? 32 : 128;
  if (version === 0 || Number(bits) > max) return null;
  return { net, bits: Number(bits), type: version === 4 ? "ipv4" : "ipv6" };
}

/** One list of egress entries, matched against a host name and an address. */
class Entries {
  private readonly names: string[] = [];
  private readonly cidrs = new BlockList();
  private readonly cidrTexts: string[] = [];
  private everything = false;
  private privateToo = false;
  private loopbackToo = false;

  constructor(entries: readonly string[]) {
    for (const raw of entries) {
      const entry = raw.trim().toLowerCase();
      const cidr = parseCidr(entry);
      if (entry === "*") this.everything = true;
      else if (entry === "private") this.privateToo = true;
      else if (entry === "loopback") this.loopbackToo = true;
      else if (cidr) {
        this.cidrs.addSubnet(cidr.net, cidr.bits, cidr.type);
        this.cidrTexts.push(entry);
      } else if (isIP(entry)) {
        this.cidrs.addAddress(entry, isIP(entry) === 6 ? "ipv6" : "ipv4");
        this.cidrTexts.push(entry);
      } else this.names.push(entry);
    }
  }

  /** The entry that matches, in words, or null. */
  match(host: string, address: string): string | null {
    const h = host.toLowerCase().replace(/\.$/, "");
    const name = this.names.find((p) => (p.startsWith("*.") ? h.endsWith(p.slice(1)) : h === p));
    if (name !== undefined) return `"${name}"`;
    const type = isIP(address) === 6 ? "ipv6" : "ipv4";
    if (this.loopbackToo && LOOPBACK.check(address, type)) return '"loopback"';
    if (this.privateToo && PRIVATE.check(address, type)) return '"private"';
    if (this.cidrTexts.length > 0 && this.cidrs.check(address, type)) return `a CIDR of ${this.cidrTexts.join(", ")}`;
    if (this.everything) return '"*"';
    return null;
  }
}

/** An engine's egress rules; `own` are the addresses its HTTP server listens on (set once serving). */
export class Egress {
  private readonly allow: Entries;
  private readonly deny: Entries;
  private readonly own: { address: string; port: number }[] = [];

  /** `option` names where the rules come from, for the refusal's "change it" hint. */
  constructor(
    options: EgressOptions = {},
    private readonly option = "the egress option",
  ) {
    this.allow = new Entries(options.allow ?? []);
    this.deny = new Entries(options.deny ?? []);
  }

  /** The engine's HTTP server listens here: never a destination. */
  addOwnAddress(address: string, port: number): void {
    this.own.push({ address: unmapped(address), port });
  }

  /** Null when `host` (resolved to `address`) may be called on `port`, else why not. */
  refusal(host: string, address: string, port: number): string | null {
    const ip = unmapped(address);
    const type = isIP(ip) === 6 ? "ipv6" : "ipv4";
    if (LINK_LOCAL.check(ip, type)) {
      return `${host} resolves to ${ip}, a link-local address (cloud metadata services live there), which the http node never calls`;
    }
    if (this.isOwnApi(ip, port)) {
      return `${host}:${port} (${ip}) is this engine's own HTTP API, which the http node never calls; call the engine's methods, or a workflow node, instead`;
    }
    if (this.allow.match(host, ip) !== null) return null;
    const denied = this.deny.match(host, ip);
    if (denied === null) return null;
    return `${host} (${ip}) is refused by the egress rule ${denied} of ${this.option}; add it to egress.allow (skein serve: --egress-allow) if the http node may call it`;
  }

  private isOwnApi(ip: string, port: number): boolean {
    return this.own.some((o) => {
      if (o.port !== port) return false;
      if (o.address === ip) return true;
      const type = isIP(ip) === 6 ? "ipv6" : "ipv4";
      // A server on 0.0.0.0 or :: answers on every local address, loopback included.
      if (o.address === "0.0.0.0" || o.address === "::") return LOOPBACK.check(ip, type) || localAddresses().has(ip);
      return LOOPBACK.check(ip, type) && LOOPBACK.check(o.address, isIP(o.address) === 6 ? "ipv6" : "ipv4");
    });
  }

  /** @throws EgressError when an IP literal host may not be called (DNS is not asked for those). */
  checkLiteral(host: string, port: number): void {
    if (isIP(host) === 0) return;
    const refused = this.refusal(host, host, port);
    if (refused !== null) throw new EgressError(refused);
  }

  /** A socket `lookup` that resolves, refuses unless every address may be called, and gives only checked addresses. */
  lookupFor(port: number): LookupFunction {
    return (hostname, options, callback): void => {
      const family = options.family === "IPv4" ? 4 : options.family === "IPv6" ? 6 : (options.family ?? 0);
      dnsLookup(hostname, { all: true, family, hints: options.hints ?? 0 }, (err, addresses) => {
        if (err) return callback(err, []);
        for (const a of addresses) {
          const refused = this.refusal(hostname, a.address, port);
          if (refused !== null) return callback(new EgressError(refused), []);
        }
        if (options.all) return callback(null, addresses);
        const first = addresses[0] as LookupAddress;
        callback(null, first.address, first.family);
      });
    };
  }
}

function unmapped(address: string): string {
  const m = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address);
  return m ? (m[1] as string) : address;
}

function localAddresses(): Set<string> {
  const out = new Set<string>();
  for (const list of Object.values(networkInterfaces())) for (const a of list ?? []) out.add(unmapped(a.address));
  return out;
}
