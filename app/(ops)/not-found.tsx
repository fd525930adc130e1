import Link from "next/link";

export default function NotFound() {
  return (
    <main className="page">
      <h1>Not found</h1>
      <p className="muted">There is nothing at this address. It may have been removed, or the id is mistyped.</p>
      <Link href="/jobs">Back to jobs</Link>
    </main>
  );
}
