export default function NotFound() {
  return (
    <main className="narrow">
      <h1>Not found</h1>
      <p className="muted">
        There is nothing at this address. If you followed a progress link, check that it was copied whole.
      </p>
    </main>
  );
}
