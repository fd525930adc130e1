export default function NotFound() {
  return (
    <main className="narrow">
      <h1>Not found</h1>
      <p className="muted">
        There is nothing at this address. If you followed a progress link, check that it was copied whole; a job's page
        is removed a long while after the job ended, or with its account.
      </p>
    </main>
  );
}
